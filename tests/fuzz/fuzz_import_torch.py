#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""fuzz_import_torch.py SECONDS [SEED]: mutation fuzzing of
gpubuddy-import-torch, in process. Each input is a sample snapshot
(tests/data/*.pickle, also gzipped) with random damage: flipped and
inserted bytes, cuts, repeated chunks, changed pickle opcodes and numbers.
Every run must end with exit 0 or 1 and, on 1, one line on stderr; any
exception, traceback or other exit status is a finding once the program,
run on that input in a process of its own, does the same (in process,
the address-space cap one run sets stays for the next). Findings are
saved under $GPB_FUZZ_OUT (default /tmp/gpb-fuzz-import) and counted. Prints runs,
distinct messages and findings."""
import contextlib
import gzip
import importlib.machinery
import io
import os
import random
import subprocess
import sys
import tempfile
import time
import types

here = os.path.dirname(os.path.abspath(__file__))
top = os.path.dirname(os.path.dirname(here))
loader = importlib.machinery.SourceFileLoader(
    "imp", os.path.join(top, "tools", "gpubuddy-import-torch"))
imp = types.ModuleType(loader.name)
loader.exec_module(imp)


def mutate(rng, data):
    b = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        op = rng.randrange(6)
        if not b:
            b += bytes([rng.randrange(256)])
        i = rng.randrange(len(b))
        if op == 0:
            b[i] ^= 1 << rng.randrange(8)
        elif op == 1:
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
        elif op == 2:
            del b[i:i + rng.randint(1, 64)]
        elif op == 3:
            j = rng.randrange(len(b))
            b[j:j] = b[i:i + rng.randint(1, 256)] * rng.randint(1, 8)
        elif op == 4:  # an opcode from pickle's own set
            b[i] = rng.choice(b"()]}aeKJMNXQqrstuvwxyz.\x80\x85\x86\x87\x88\x89\x8a\x8c\x94")
        else:
            del b[i:]
    return bytes(b)


def main():
    secs = float(sys.argv[1]) if len(sys.argv) > 1 else 30
    rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
    outdir = os.environ.get("GPB_FUZZ_OUT", "/tmp/gpb-fuzz-import")
    os.makedirs(outdir, exist_ok=True)
    data = os.path.join(top, "tests", "data")
    seeds = []
    for f in sorted(os.listdir(data)):
        if f.endswith(".pickle"):
            raw = open(os.path.join(data, f), "rb").read()
            seeds += [raw, gzip.compress(raw)]
    tmp = tempfile.mkdtemp(prefix="gpb-fuzz-import-")
    inp, out = os.path.join(tmp, "in.pickle"), os.path.join(tmp, "out.trace")
    runs = findings = 0
    msgs = set()
    end = time.time() + secs
    while time.time() < end:
        d = mutate(rng, rng.choice(seeds))
        with open(inp, "wb") as f:
            f.write(d)
        err = io.StringIO()
        rc = None
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                rc = imp.main([inp, "-o", out, "-q", "--max-input", "8000000"])
        except SystemExit as e:
            rc = e.code
        except BaseException as e:  # a finding: the tool must not raise
            rc = "%s: %s" % (type(e).__name__, e)
        text = err.getvalue()
        runs += 1
        bad = rc not in (0, 1) or (rc == 1 and len(text.strip().splitlines()) != 1)
        if bad:  # confirmed only as the program runs: its own process
            p = subprocess.run([sys.executable, os.path.join(top, "tools", "gpubuddy-import-torch"),
                                inp, "-o", out, "-q", "--max-input", "8000000"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               universal_newlines=True, errors="replace")
            bad = p.returncode not in (0, 1) or (
                p.returncode == 1 and len(p.stderr.strip().splitlines()) != 1)
            text = p.stderr
            rc = p.returncode
        if bad:
            findings += 1
            with open(os.path.join(outdir, "finding-%d.pickle" % findings), "wb") as f:
                f.write(d)
            sys.stderr.write("finding %d: rc %r: %s\n" % (findings, rc, text[:300]))
        elif rc == 1:
            msgs.add(text.split(":")[1].strip()[:40] if ":" in text else text[:40])
    print("fuzz_import_torch: %d runs in %.0f s, %d distinct messages, %d findings"
          % (runs, secs, len(msgs), findings))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
