#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_import_torch.py: gpubuddy-import-torch on the fixture snapshots
(tests/data/gen_torch_snapshot.py made them and the traces they must give),
then malformed and malicious pickles: each must fail with a clear message
and exit 1, never run code, never leave a half-written trace.

One Python process: the importer is loaded once as a module, and each case
runs its main() in a child forked from a copy of the process made right
after loading it (so exit codes, file descriptors, resource limits and
even the heap are those of a fresh run of the tool, without starting
Python again); one case needs a fresh process (see --max-memory while
writing). gpubuddy-replay runs as a program.

  test_import_torch.py SRCDIR REPLAY
"""
import gzip
import importlib.machinery
import os
import pickle
import re
import resource
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import traceback
import types

srcdir, replay = sys.argv[1], sys.argv[2]
data = os.path.join(srcdir, "tests", "data")
loader = importlib.machinery.SourceFileLoader(
    "gpubuddy_import_torch", os.path.join(srcdir, "tools", "gpubuddy-import-torch"))
imp_mod = types.ModuleType(loader.name)
loader.exec_module(imp_mod)

tmp = tempfile.mkdtemp(prefix="gpb-import-test.")
fails = 0


def fail(msg):
    global fails
    sys.stderr.write("FAIL: %s\n" % msg)
    fails += 1


class Run:
    """What one run of the importer gave: its exit code and output."""
    def __init__(self, rc, out, err):
        self.rc, self.out, self.err = rc, out, err
        self.errtext = err.decode("utf-8", "replace")

    def err_lines(self):
        return self.err.count(b"\n")


def child(req):
    """In a forked child: the importer's main(args) (or say(text)) with
    stdin from a file, stdout and stderr to files, and the limits asked.
    Never returns."""
    rc = 1
    try:
        fd = os.open(req["stdin"] or os.devnull, os.O_RDONLY)
        os.dup2(fd, 0)
        for path, target in ((req["out"], 1), (req["err"], 2)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(fd, target)
        if req["as_kb"] is not None:
            lim = req["as_kb"] << 10
            resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
        if req["fsize"] is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (req["fsize"], req["fsize"]))
        if req["umask"] is not None:
            os.umask(req["umask"])
        if req["stream"] is not None:
            imp_mod.STREAMING = req["stream"]
        if req["say"] is not None:
            imp_mod.say(req["say"])
            rc = 0
        else:
            rc = imp_mod.main(list(req["args"]))
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        traceback.print_exc()
        rc = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        pass
    os._exit(rc or 0)


def zygote(rfd, wfd):
    """Forks one child per request, from a process that has done nothing
    but load the importer: each case starts as a fresh run of the tool
    would (its heap too, which --max-memory's cap depends on)."""
    rf, wf = os.fdopen(rfd, "rb"), os.fdopen(wfd, "wb")
    while True:
        try:
            req = pickle.load(rf)
        except EOFError:
            os._exit(0)
        pid = os.fork()
        if pid == 0:
            child(req)
        _, st = os.waitpid(pid, 0)
        pickle.dump(os.waitstatus_to_exitcode(st), wf)
        wf.flush()


req_r, req_w = os.pipe()
rep_r, rep_w = os.pipe()
sys.stdout.flush()
sys.stderr.flush()
zpid = os.fork()
if zpid == 0:
    os.close(req_w)
    os.close(rep_r)
    zygote(req_r, rep_w)
os.close(req_r)
os.close(rep_w)
to_zygote, from_zygote = os.fdopen(req_w, "wb"), os.fdopen(rep_r, "rb")


def imp(*args, stdin=None, as_kb=None, fsize=None, umask=None, say=None,
        stream=None):
    """One run of the importer with these arguments: stdin from the file
    `stdin`, stdout and stderr captured, under ulimit -v `as_kb` or a file
    size limit of `fsize` bytes. With `say`, imp_mod.say(say) instead.
    `stream` sets its STREAMING: "off" unpickles whole, "only" makes the
    streaming reader's giving up an error."""
    req = dict(args=args, stdin=stdin, as_kb=as_kb, fsize=fsize, umask=umask,
               say=say, stream=stream, out=os.path.join(tmp, ".out"),
               err=os.path.join(tmp, ".err"))
    pickle.dump(req, to_zygote)
    to_zygote.flush()
    rc = pickle.load(from_zygote)
    with open(req["out"], "rb") as f:
        out = f.read()
    with open(req["err"], "rb") as f:
        err = f.read()
    return Run(rc, out, err)


def run_replay(*args):
    p = subprocess.run([replay] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT)
    return p.returncode, p.stdout.decode("utf-8", "replace")


def t(name):
    return os.path.join(tmp, name)


def read(path, mode="rb"):
    with open(path, mode) as f:
        return f.read()


def same(path, expected_path):
    return os.path.exists(path) and read(path) == read(expected_path)


def write_pickle(path, obj):
    with open(path, "wb") as f:
        f.write(pickle.dumps(obj))


def lines(path):
    return read(path, "r").split("\n")


def has_line(path, line):
    return line in read(path, "r").split("\n")


def sites(path):
    """The sites a trace defines, {id: "FRAME;FRAME;..."}: v2's "# site"
    lines, or v3's frames and stacks (docs/TRACE_FORMAT.md) joined back."""
    fr, st, last = {}, {}, None
    with open(path, encoding="utf-8") as f:
        for l in f:
            l = l.rstrip("\n")
            w = l.split(" ", 3)
            if l.startswith("# frame "):
                fr[w[2]] = w[3]
            elif l.startswith("# stack "):
                last = w[2]
                st[last] = [fr[x] for x in l.split()[3:]]
            elif l.startswith("# stack+ "):
                st[last] += [fr[x] for x in l.split()[2:]]
            elif l.startswith("# site "):
                st[w[2]] = [w[3]]
    return {k: ";".join(v) for k, v in st.items()}


def grep_after(text, pattern, n):
    """grep -A n: each line matching pattern and the n lines after it."""
    ls = text.split("\n")
    out = []
    for i, l in enumerate(ls):
        if re.search(pattern, l):
            out += ls[i:i + n + 1]
    return "\n".join(out)


# 1. Both layouts convert to exactly the expected traces: with the call
# sites their frames give (v3), and with --no-frames the v1 trace the
# importer wrote before it kept frames, byte for byte.
for s in ("torch_snapshot", "torch_snapshot_old"):
    pk = os.path.join(data, s + ".pickle")
    sites_exp = os.path.join(data, s + ".sites.expected")
    r = imp("-q", pk, "-o", t(s + ".trace"))
    if r.rc:
        fail("%s: exit %d" % (s, r.rc))
    if not same(t(s + ".trace"), sites_exp):
        fail("%s: output differs from %s.sites.expected" % (s, s))
    r = imp("-q", pk, "-o", t(s + ".trace.gz"))
    if r.rc:
        fail("%s .gz: exit %d" % (s, r.rc))
    if gzip.decompress(read(t(s + ".trace.gz"))) != read(sites_exp):
        fail("%s: .gz output differs" % s)
    r = imp("-q", "--no-frames", pk, "-o", t(s + ".v1.trace"))
    if r.rc:
        fail("%s --no-frames: exit %d" % (s, r.rc))
    if not same(t(s + ".v1.trace"), os.path.join(data, s + ".expected")):
        fail("%s --no-frames: output differs from %s.expected" % (s, s))
# stdin and stdout.
snap = os.path.join(data, "torch_snapshot.pickle")
r = imp("-q", "-", "-o", "-", stdin=snap)
if r.rc:
    fail("stdin/stdout: exit %d" % r.rc)
if r.out != read(os.path.join(data, "torch_snapshot.sites.expected")):
    fail("stdin/stdout output differs")
r = imp("-q", "--no-frames", "-", "-o", "-", stdin=snap)
if r.rc:
    fail("stdin/stdout: exit %d" % r.rc)
if r.out != read(os.path.join(data, "torch_snapshot.expected")):
    fail("stdin/stdout --no-frames output differs")

# 1b. The streaming reader (PickleStream) converts each history as it
# reads it, and gives up (the pickle is then unpickled whole) wherever
# it could differ from pickle.load. A snapshot shaped like torch's
# (bench/big_snapshot.py: frame dicts shared through the memo, segments
# first), as protocol 4, as protocol 2 (BINPUT), gzipped (read from
# memory) and from stdin, is read by the streaming reader alone
# (STREAMING "only") into the same bytes and summary as whole.
gen = t("gen.pickle")
subprocess.run([sys.executable, os.path.join(srcdir, "bench", "big_snapshot.py"),
                "2", gen], check=True)
with open(gen, "rb") as f:
    snap_obj = pickle.load(f)
with open(t("gen2.pickle"), "wb") as f:
    pickle.dump(snap_obj, f, protocol=2)
with open(t("gen.pickle.gz"), "wb") as f:
    f.write(gzip.compress(read(gen), 1))
del snap_obj
for name, args, stdin in (
        ("protocol 4", (gen,), None), ("protocol 2", (t("gen2.pickle"),), None),
        ("gzipped", (t("gen.pickle.gz"),), None), ("stdin", ("-",), gen),
        ("--no-frames", ("--no-frames", gen), None)):
    got = {}
    for mode in ("only", "off"):
        out = t("gen.%s.trace.gz" % mode)
        r = imp(*args, "-o", out, stdin=stdin, stream=mode)
        if r.rc:
            fail("%s, STREAMING %s: exit %d: %s" % (name, mode, r.rc, r.errtext))
        got[mode] = (r.err, read(out) if os.path.exists(out) else None)
    if got["only"] != got["off"]:
        fail("%s: the streaming reader's trace or summary differs from "
             "unpickling whole" % name)
for s in ("torch_snapshot", "torch_snapshot_old"):
    r = imp("-q", os.path.join(data, s + ".pickle"), "-o", t("only.trace"),
            stream="only")
    if r.rc or not same(t("only.trace"), os.path.join(data, s + ".sites.expected")):
        fail("%s: streamed: exit %d, or not the expected trace: %s"
             % (s, r.rc, r.errtext))
# What it gives up on gives the same result as before, whole: an entry or
# a frame list it let go of referred to again through the memo, one list
# for two devices, a bad entry before a pickle error, a global after a
# history it converted (refused, nothing run).


class Evil2:
    def __reduce__(self):
        return (os.system, ("touch " + t("pwned2"),))


f1 = [{"filename": "/w/a.py", "line": 1, "name": "f"},
      {"filename": "/w/b.py", "line": 2, "name": "g"}]
ent = {"action": "alloc", "addr": 4096, "size": 512, "stream": 0,
       "frames": f1}
# pickle.dump appends a list's items 1000 at a time: the 1001st entry is
# read after the first one's frame list was let go.
again = [ent] + [{"action": "free_requested", "addr": 4096, "size": 512}
                 for _ in range(1000)] + [
    {"action": "alloc", "addr": 8192, "size": 512, "frames": f1}]
two = [{"action": "alloc", "addr": 8192, "size": 512, "frames": f1}]
cut = pickle.dumps({"device_traces": [
    [{"action": 5}] + [{"action": "alloc", "addr": 4096 * (k + 1), "size": 512}
                       for k in range(3000)]]})
cases = (  # name, pickle, options, a word the message has
    ("an entry referred to again", pickle.dumps(
        {"device_traces": [[ent, {"action": "free_completed", "addr": 4096,
                                  "size": 512}]], "segments": [ent]}), (), ""),
    ("a frame list referred to again",
     pickle.dumps({"device_traces": [again]}), (), ""),
    ("one list for two devices", pickle.dumps({"device_traces": [two, two]}),
     ("--device", "all"), ""),
    ("a bad entry, then damage", cut[:len(cut) // 2], (), "not a readable"),
    ("a global after a history", pickle.dumps(
        {"device_traces": [[ent]], "segments": [Evil2()]}), (), "refused"),
)
for name, pk, extra, word in cases:
    with open(t("memo.pickle"), "wb") as f:
        f.write(pk)
    got = {}
    for mode in ("auto", "off", "only"):
        r = imp(t("memo.pickle"), "-o", t("memo.trace"), *extra, stream=mode)
        # The traces written, by name (--device all writes one a device).
        outs = sorted(n for n in os.listdir(tmp) if n.startswith("memo.")
                      and n.endswith(".trace"))
        got[mode] = (r.rc, r.err, [(n, read(t(n))) for n in outs])
        for n in outs:
            os.unlink(t(n))
    if got["auto"] != got["off"]:
        fail("%s: streamed, not what unpickling whole gives: %r, %r"
             % (name, got["auto"][:2], got["off"][:2]))
    if b"the streaming reader gave up" not in got["only"][1]:
        fail("%s: the streaming reader did not give up: %r"
             % (name, got["only"][:2]))
    if word.encode() not in got["auto"][1]:
        fail("%s: the message lacks '%s': %r" % (name, word, got["auto"][:2]))
if os.path.exists(t("pwned2")):
    fail("a global after a history ran code")

# 2. The imported trace replays: 100 allocs + 60 frees + one failed request
# (two ops); the 80 GiB request fails again.
rc, out = run_replay("--json", "--quiet", t("torch_snapshot.trace.gz"))
if rc:
    fail("replay exited %d" % rc)
for want, what in (('"ops": 162,', "expected 162 ops"),
                   ('"recorded_failures": 1,', "expected 1 recorded failure"),
                   ('"failed_allocs": 1,', "expected 1 failed alloc")):
    if want not in out:
        fail("replay: " + what)

# 2b. Call sites. A snapshot whose stacks include the frames that
# PyTorch's memory_viz leaves out (the unwinder's, CPython's evaluation
# loop, the process entry): the importer leaves them out too, and
# gpubuddy-replay --top-sites names the program's own frames, innermost
# first. A snapshot with no frames at all is a v1 trace as before.
def fr(*names):
    return [{"filename": f, "line": l, "name": n} for f, l, n in names]


gather = ("/src/torch/csrc/profiler/combined_traceback.cpp", 7,
          "torch::CapturedTraceback::gather(bool, bool, bool)")
evalf = ("/usr/src/python3.11/Python/ceval.c", 5, "_PyEval_EvalFrameDefault")
start = ("??", 0, "_start")
attn = fr(gather, ("/w/model.py", 42, "attention"), evalf,
          ("/w/train.py", 7, "step"), start)
mlp = fr(gather, ("/w/model.py", 80, "mlp"), evalf, ("/w/train.py", 7, "step"))
hidden = fr(gather, evalf, start)  # nothing left: no call site
e = []
for k in range(4):
    e.append({"action": "alloc", "addr": 0x10000 * (k + 1), "size": 3 << 20,
              "stream": 0, "frames": attn})
for k in range(2):
    e.append({"action": "alloc", "addr": 0x100000 * (k + 1), "size": 1 << 20,
              "stream": 0, "frames": mlp})
e.append({"action": "alloc", "addr": 0x900000, "size": 512, "stream": 0,
          "frames": hidden})
e.append({"action": "oom", "size": 1 << 40, "stream": 0, "frames": mlp})
e.append({"action": "free_completed", "addr": 0x10000, "size": 3 << 20,
          "stream": 0, "frames": []})
write_pickle(t("frames.pickle"), {"device_traces": [e]})
for x in e:
    del x["frames"]
write_pickle(t("noframes.pickle"), {"device_traces": [e]})

r = imp("-q", t("frames.pickle"), "-o", t("frames.trace"))
if r.rc:
    fail("frames: exit %d" % r.rc)
ft = read(t("frames.trace"), "r")
fs = sites(t("frames.trace"))
if fs.get("1") != "/w/model.py:42 attention;/w/train.py:7 step":
    fail("frames: site 1 is not attention;step: %s" % fs)
if fs.get("2") != "/w/model.py:80 mlp;/w/train.py:7 step":
    fail("frames: site 2 is not mlp;step")
if len(fs) != 2:
    fail("frames: not two sites")
# Each frame is written once: train.py:7 step is in both stacks.
if sum("train.py:7 step" in l for l in ft.split("\n")) != 1:
    fail("frames: a frame written twice")
if re.search("gather|ceval|_start", ft):
    fail("frames: memory_viz's omitted frames were kept")
if not has_line(t("frames.trace"), "7 6000 alloc 0x900000 512 0 0x0"):
    fail("frames: a stack with no frames left has a site")
if not has_line(t("frames.trace"), "9 8000 free 0x10000 3145728 0 0x0 1"):
    fail("frames: the free lacks its allocation's site")
rc, top = run_replay("--top-sites=3", t("frames.trace"))
if rc:
    fail("replay --top-sites: exit %d" % rc)
if "/w/model.py:42 attention" not in grep_after(top, r"1\. 12.0 MiB.*site 1: model.py:42 attention$", 2):
    fail("--top-sites does not name attention first: %s" % top)
if "/w/train.py:7 step" not in grep_after(top, r"2\. 2.0 MiB.*site 2: model.py:80 mlp$", 2):
    fail("--top-sites does not name mlp's stack second")
if "site 2" not in grep_after(top, "failed allocations", 2):
    fail("--top-sites: the failure is not mlp's")
r = imp("-q", "--no-frames", t("frames.pickle"), "-o", t("nf.trace"))
if r.rc:
    fail("--no-frames: exit %d" % r.rc)
r = imp("-q", t("noframes.pickle"), "-o", t("none.trace"))
if r.rc:
    fail("no frames: exit %d" % r.rc)
if lines(t("none.trace"))[0] != "# gpubuddy-trace v1":
    fail("no frames: not a v1 trace")
if read(t("nf.trace")) != read(t("none.trace")):
    fail("--no-frames differs from a snapshot without frames")

# 2c. Past GPB_MAX_SITES (65535) distinct stacks, new ones are 0 (no
# site), as in a pool; and a stack too long for a line keeps every frame
# (over "# stack+" lines), within the 4096-byte line limit.
e = [{"action": "alloc", "addr": 1 << 40, "size": 512, "stream": 0,
      "frames": [{"filename": "/" + "d" * 300, "line": k, "name": "h"}
                 for k in range(2000)]}]
write_pickle(t("deep.pickle"), {"device_traces": [e]})
e += [{"action": "alloc", "addr": 4096 * (k + 1), "size": 512, "stream": 0,
       "frames": [{"filename": "f.py", "line": k, "name": "g"}]}
      for k in range(65536)]
write_pickle(t("many.pickle"), {"device_traces": [e]})
del e
r = imp("-q", t("many.pickle"), "-o", t("many.trace"))
if r.rc:
    fail("many sites: exit %d" % r.rc)
mt = lines(t("many.trace"))
ms = sites(t("many.trace"))
if ms.get("65535") != "f.py:65533 g":
    fail("many sites: no site 65535")
if "65536" in ms:
    fail("many sites: an id past 65535")
if "65537 65536000 alloc 0x10000000 512 0 0x0" not in mt:
    fail("many sites: stack 65536 is not site 0")
if any(len(l) > 4096 for l in mt):
    fail("a line longer than 4096 bytes")
if sum(bool(re.match(r"/d*:[0-9]* h$", f))
       for f in ms.get("1", "").split(";")) != 2000:
    fail("the deep stack lost frames")
if not any(l.startswith("# stack+ ") for l in mt):
    fail("the deep stack took no stack+ line")
del mt, ms
r = imp("-q", t("deep.pickle"), "-o", t("deep.trace"))
if r.rc:
    fail("deep stack: exit %d" % r.rc)
rc, out = run_replay("--quiet", "--top-sites=1", t("deep.trace"))
n = sum("/ddd" in l for l in out.split("\n"))
if n != 2000:
    fail("replay does not read the deep stack whole: %d" % n)
rc, _ = run_replay("--quiet", t("many.trace"))
if rc:
    fail("replay of the many-site trace: exit %d" % rc)

# 3. Devices: 1 has an empty history (a warning, a trace with no ops),
# 7 does not exist (an error naming what there is).
r = imp(snap, "--device", "1", "-o", t("d1.trace"))
if r.rc != 1:
    fail("--device 1 (an empty history): exit %d, expected an error" % r.rc)
if "no allocations" not in r.errtext:
    fail("--device 1: no message")
if os.path.exists(t("d1.trace")):
    fail("--device 1: left an empty trace behind")
r = imp(snap, "--device", "7", "-o", t("d7.trace"))
if r.rc != 1:
    fail("--device 7 did not exit 1")
if "device 7 not in the snapshot" not in r.errtext:
    fail("--device 7: %s" % r.errtext)
if os.path.exists(t("d7.trace")):
    fail("--device 7 left an output file")

# 4. Malformed input: each exits 1 with a message containing the context.
BAD = t("bad.pickle")
last = None


def bad(name, *words, **kw):
    """The importer on bad.pickle must exit 1 with each of words in its
    one message, write nothing and print no traceback."""
    global last
    if os.path.exists(t("out.trace")):
        os.unlink(t("out.trace"))
    r = imp(BAD, "-o", t("out.trace"), *kw.get("extra", ()))
    last = r
    if r.rc != 1:
        fail("%s: exit %d, expected 1" % (name, r.rc))
    for w in words:
        if w not in r.errtext:
            fail("%s: message lacks '%s': %s" % (name, w, r.errtext))
    if os.path.exists(t("out.trace")):
        fail("%s: left a partial trace" % name)
    if "Traceback" in r.errtext:
        fail("%s: Python traceback" % name)
    return r


def mk(obj):
    write_pickle(BAD, obj)


with open(BAD, "wb") as f:
    f.write(read(snap)[:3000])
bad("truncated", "not a readable pickle")
open(BAD, "wb").close()
bad("empty", "empty")
with open(BAD, "wb") as f:
    f.write(b"hello world")
bad("text", "not a readable pickle")
mk([{"address": 1, "blocks": []}])
bad("old list layout", "list of segments")
mk({"segments": []})
bad("no history", "device_traces", "_record_memory_history")
mk({"device_traces": 5})
bad("traces not a list", "expected a list")
mk({"device_traces": [[{"action": "alloc", "size": 512}]]})
bad("missing addr", "device_traces[0][0] (alloc)", "missing 'addr'")
mk({"device_traces": [[{"action": "alloc", "addr": 4096, "size": -512}]]})
bad("negative size", "negative")
mk({"device_traces": [[{"action": "alloc", "addr": "x", "size": 512}]]})
bad("string addr", "expected an integer")
mk({"device_traces": [[{"action": "alloc", "addr": 0, "size": 512}, 7]]})
bad("entry not a dict", "device_traces[0][1]")
mk({"device_traces": [[{"action": "alloc", "addr": 2 ** 70, "size": 512}]]})
bad("huge addr", "64 bits")
os.unlink(BAD)
bad("missing", "cannot open")
# Frames: not a list, a frame not a dict, missing or mistyped keys.


def fa(frames):
    return {"device_traces": [[{"action": "alloc", "addr": 4096, "size": 512,
                                "frames": frames}]]}


mk(fa({"a": 1}))
bad("frames not a list", "device_traces[0][0] (alloc)", "'frames' is a dict")
mk(fa([7]))
bad("frame not a dict", "frame 0 is a int")
mk(fa([{"filename": "a.py", "line": 1}]))
bad("frame without name", "frame 0: 'name' is missing")
mk(fa([{"filename": "a.py", "name": "f"}]))
bad("frame without line", "frame 0: missing 'line'")
mk(fa([{"filename": 3, "line": 1, "name": "f"}]))
bad("numeric file name", "'filename' is 3")
mk(fa([{"filename": "a", "line": -1, "name": "f"}]))
bad("negative line", "negative")
# Huge, odd strings are cut and cleaned, not refused: a frame of a
# megabyte, with ';', newlines, control characters, a lone surrogate and
# non-ASCII text, still makes one line of the trace, which replays.
mk(fa([{"filename": "x" * (1 << 20), "line": 2 ** 63,
        "name": "a;b\nc\x00\ud800 \u00e9t\u00e9"}]))
r = imp("-q", BAD, "-o", t("odd.trace"))
if r.rc:
    fail("odd frame strings: exit %d: %s" % (r.rc, r.errtext))
odd = read(t("odd.trace"))
if odd.count(b"\n") != 5:
    fail("odd frame strings: not 5 lines: %r" % odd[:300])
if ":9223372036854775808 a?b?c?? \u00e9t\u00e9".encode() not in odd:
    fail("odd frame strings: not cleaned: %r" % odd[-100:])
rc, _ = run_replay("--quiet", "--top-sites=1", t("odd.trace"))
if rc:
    fail("odd frame strings: the trace does not replay")

# 5. A malicious pickle (it would create a file through os.system) is
# refused before anything runs.


class Evil:
    def __reduce__(self):
        return (os.system, ("touch " + t("pwned"),))


mk({"device_traces": [[Evil()]]})
bad("malicious", "refused")
if os.path.exists(t("pwned")):
    fail("the malicious pickle ran code")

# 5b. Input that would take unbounded memory or time gets one line, no
# traceback, and memory within the bounds (each under ulimit -v as well,
# so a bound that failed would fail the test rather than the machine).
mk({"device_traces": [[]]})
bad("empty history", "no allocations in its history")


def X(s):
    b = s.encode()
    return b"X" + struct.pack("<I", len(b)) + b


with open(t("bomb.pickle"), "wb") as f:
    f.write(gzip.compress(b"\0" * (80 << 20), 9))
with open(t("memo.pickle"), "wb") as f:
    f.write(b"\x80\x02N" + b"r" + struct.pack("<I", 1 << 27) + b".")
sys.set_int_max_str_digits(0)
big = 10 ** 5000
write_pickle(t("bigint.pickle"),
             {"device_traces": [[{"action": big, "addr": 1, "size": 1}]]})
write_pickle(t("bigkey.pickle"), {"device_traces": [[
    {big: 1, "action": "alloc", "addr": 1, "size": 512}]]})
nest = b"]" * 200001 + b"a" * 200000
with open(t("deep.pickle"), "wb") as f:
    f.write(b"\x80\x02}" + X("device_traces") + b"]]}" + X("action") + nest
            + b"saas.")
for k in ("bomb", "memo", "bigint", "bigkey", "deep"):
    shutil.copyfile(t(k + ".pickle"), BAD)
    if os.path.exists(t("out.trace")):
        os.unlink(t("out.trace"))
    r = imp(BAD, "-o", t("out.trace"), "--max-input", "50000000",
            as_kb=1500000)
    if k == "bigkey":  # an extra key, however odd, is ignored
        if r.rc:
            fail("%s: exit %d: %s" % (k, r.rc, r.errtext[-300:]))
        continue
    if r.rc != 1:
        fail("%s: exit %d, expected 1: %s" % (k, r.rc, r.errtext[-300:]))
    if r.err_lines() != 1:
        fail("%s: not one line: %s" % (k, r.errtext))
    if "Traceback" in r.errtext:
        fail("%s: Python traceback" % k)

# 5b'. A message that quotes damaged input (newlines, control bytes) is
# still one line (fuzz_import_torch.py found pickles whose error text
# carried them).
r = imp(say="bad float: '1\n2\x1e\x00'")
if r.err_lines() != 1:
    fail("a message with a newline is %d lines" % r.err_lines())

# 5b''. fuzz_import_torch.py found pickles whose failed load (a MemoryError
# under the address-space cap) made CPython write a SystemError line to
# stderr before ours: the message is one line again.
shutil.copyfile(os.path.join(data, "fuzz_memoryerror.pickle"), BAD)
r = bad("memory error noise", "not a readable pickle")
if r.err_lines() != 1:
    fail("memory error: %s" % r.errtext)

# 5c. Several devices: the summary names the others; --device all writes
# one trace per device with a history (.DEVICE before the first dot).
mk({"device_traces": [[{"action": "alloc", "addr": 4096, "size": 512}], [],
                      [{"action": "alloc", "addr": 8192, "size": 1024}]]})
r = imp(BAD, "-o", t("one.trace"))
if r.rc:
    fail("two devices: exit %d" % r.rc)
if "device 2 also has a history" not in r.errtext:
    fail("the other device is not named: %s" % r.errtext)
r = imp(BAD, "--device", "all", "-o", t("all.trace.gz"))
if r.rc:
    fail("--device all: exit %d" % r.rc)
if not all(os.path.exists(t(n)) and os.path.getsize(t(n)) > 0
           for n in ("all.0.trace.gz", "all.2.trace.gz")):
    fail("--device all did not write all.0 and all.2")
if os.path.exists(t("all.1.trace.gz")):
    fail("--device all wrote a trace for a device without history")
r = imp(BAD, "--device", "x", "-o", t("x.trace"))
if r.rc != 2:
    fail("--device x did not exit 2")

# 5d. Times: the last time_ns a trace holds (2^64 - 1) is 18446744073709551
# us after the first entry; one more does not fit and is refused, naming
# the entry, rather than written as a number the replayer rejects.


def tm(d):
    mk({"device_traces": [[
        {"action": "alloc", "addr": 4096, "size": 512, "time_us": 5},
        {"action": "free_completed", "addr": 4096, "size": 512,
         "time_us": 5 + d}]]})


tm(18446744073709551)
r = imp("-q", BAD, "-o", t("tmax.trace"))
if r.rc:
    fail("the largest time: exit %d" % r.rc)
if "2 18446744073709551000 free 0x1000 512 0 0x0" not in lines(t("tmax.trace")):
    fail("the largest time: %s" % lines(t("tmax.trace"))[-2:])
rc, _ = run_replay("--quiet", t("tmax.trace"))
if rc:
    fail("the largest time does not replay")
tm(18446744073709552)
bad("time past 2^64 ns", "device_traces[0][1] (free_completed)", "'time_us'",
    "64-bit")
tm(2 ** 63)
bad("time 2^63 us", "device_traces[0][1]", "64-bit")

# 5e. All or nothing. Outputs go to a temporary file and are renamed into
# place only when whole, so a failed write leaves no partial trace and an
# existing output as it was, and no temporary file behind.
o = t("o")
os.mkdir(o)
with open(os.path.join(o, "keep"), "w") as f:
    f.write("old trace\n")
name = ""


def O(n):
    return os.path.join(o, n)


def only(*names):
    """The files in o must be exactly these."""
    got = sorted(os.listdir(o))
    if got != sorted(names):
        fail("%s: files in the output directory: %s, expected %s"
             % (name, " ".join(got), " ".join(names)))


def intact(*names):
    """Each named output still holds the old text."""
    for n in names:
        if not same(O(n), O("keep")):
            fail("%s: %s was changed or removed" % (name, n))


def onefail(r):
    """The run's exit must be 1 with one line, no traceback."""
    if r.rc != 1:
        fail("%s: exit %d, expected 1: %s" % (name, r.rc, r.errtext))
    if r.err_lines() != 1:
        fail("%s: not one line: %s" % (name, r.errtext))


# A full disk (a file size limit makes writes fail with EFBIG; Python
# ignores SIGXFSZ): the old file stays.
name = "file size limit"
shutil.copyfile(O("keep"), O("t.trace"))
r = imp("-q", snap, "-o", O("t.trace"), fsize=1024)
onefail(r)
if "cannot write %s: File too large" % O("t.trace") not in r.errtext:
    fail("%s: %s" % (name, r.errtext))
intact("t.trace")
only("keep", "t.trace")
# An output that is not a regular file is written in place, never
# replaced or removed: a FIFO whose reader leaves early stays a FIFO.
name = "FIFO"
os.mkfifo(O("fifo"))
reader = subprocess.Popen(["head", "-c", "100", O("fifo")],
                          stdout=subprocess.DEVNULL)
r = imp("-q", t("many.pickle"), "-o", O("fifo"))
onefail(r)
reader.wait()
if "cannot write %s: Broken pipe" % O("fifo") not in r.errtext:
    fail("%s: %s" % (name, r.errtext))
if not stat.S_ISFIFO(os.lstat(O("fifo")).st_mode):
    fail("%s: the FIFO was removed" % name)
os.unlink(O("fifo"))
# /dev/full the same, but only when not root: an importer that removed
# its output on failure would remove /dev/full (as it once did).
if os.getuid() != 0 and os.access("/dev/full", os.W_OK):
    name = "/dev/full"
    r = imp("-q", snap, "-o", "/dev/full")
    onefail(r)
    if "cannot write /dev/full: No space left on device" not in r.errtext:
        fail("%s: %s" % (name, r.errtext))
    if not stat.S_ISCHR(os.stat("/dev/full").st_mode):
        fail("/dev/full is no longer a device")
# Out of memory while writing (the gzip writer under --max-memory): the
# old file stays, and the message says it was the writing that ran out.
# A cap of 100000 bytes is below any process's size, so the writer fails
# where it needs fresh memory; a forked child could reuse free heap it
# inherited, so this one case runs the tool as a fresh process.
name = "--max-memory while writing"
mk({"device_traces": [[{"action": "alloc", "addr": 4096, "size": 512}]]})
shutil.copyfile(O("keep"), O("m.trace.gz"))
p = subprocess.run([sys.executable, os.path.join(srcdir, "tools", "gpubuddy-import-torch"),
                    "-q", "--max-memory=100000", BAD, "-o", O("m.trace.gz")],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
r = Run(p.returncode, p.stdout, p.stderr)
onefail(r)
if ("writing %s needs more than the 100000 bytes of address space that "
        "--max-memory allows; no file was written" % O("m.trace.gz")) not in r.errtext:
    fail("%s: %s" % (name, r.errtext))
intact("t.trace", "m.trace.gz")
only("keep", "m.trace.gz", "t.trace")
# Replacing keeps an existing file's mode and a symbolic link; a new file
# gets the umask's mode, as before.
name = "replace"
os.chmod(O("t.trace"), 0o600)
os.symlink("t.trace", O("link.trace"))
r = imp("-q", snap, "-o", O("link.trace"))
if r.rc:
    fail("%s: exit %d" % (name, r.rc))
if not os.path.islink(O("link.trace")):
    fail("%s: the symbolic link was replaced" % name)
if not same(O("t.trace"), os.path.join(data, "torch_snapshot.sites.expected")):
    fail("%s: the link's file was not written" % name)
if stat.S_IMODE(os.stat(O("t.trace")).st_mode) != 0o600:
    fail("%s: mode not kept: %o" % (name, os.stat(O("t.trace")).st_mode))
r = imp("-q", snap, "-o", O("new.trace"), umask=0o022)
if r.rc:
    fail("%s: new file: exit %d" % (name, r.rc))
if stat.S_IMODE(os.stat(O("new.trace")).st_mode) != 0o644:
    fail("%s: a new file's mode: %o" % (name, os.stat(O("new.trace")).st_mode))
for n in ("link.trace", "new.trace", "m.trace.gz"):
    os.unlink(O(n))
shutil.copyfile(O("keep"), O("t.trace"))
# --device all checks every device before writing any: device 1's bad
# size leaves no all.0; and when device 2's write fails, device 0's
# trace, already written, is not put in place either.
name = "--device all, a bad device"
mk({"device_traces": [[{"action": "alloc", "addr": 4096, "size": 512}],
                      [{"action": "alloc", "addr": 4096, "size": -1}]]})
shutil.copyfile(O("keep"), O("all.0.trace"))
r = imp("-q", BAD, "--device", "all", "-o", O("all.trace"))
onefail(r)
if "device_traces[1][0] (alloc): 'size' is negative" not in r.errtext:
    fail("%s: %s" % (name, r.errtext))
intact("all.0.trace")
only("all.0.trace", "keep", "t.trace")
name = "--device all, a failed write"
big_dev = [{"action": "alloc", "addr": 4096 * (k + 1), "size": 512}
           for k in range(200)]
mk({"device_traces": [[{"action": "alloc", "addr": 4096, "size": 512}], [],
                      big_dev]})
os.unlink(O("all.0.trace"))
r = imp("-q", BAD, "--device", "all", "-o", O("all.trace"), fsize=1024)
onefail(r)
if "cannot write %s: File too large" % O("all.2.trace") not in r.errtext:
    fail("%s: %s" % (name, r.errtext))
only("keep", "t.trace")
r = imp("-q", BAD, "--device", "all", "-o", O("all.trace"))
if r.rc:
    fail("--device all: exit %d" % r.rc)
only("all.0.trace", "all.2.trace", "keep", "t.trace")
for n in ("all.0.trace", "all.2.trace"):
    os.unlink(O(n))

# 5f. An output that is the input snapshot (by name, through a link, or
# as stdin) is a usage error: exit 2, one line, the snapshot untouched.
name = "output = input"
shutil.copyfile(snap, O("in.pickle"))
os.symlink("in.pickle", O("in.link"))
for args in ((O("in.pickle"), "-o", O("in.pickle")),
             (O("in.link"), "-o", O("in.pickle")),
             (O("in.pickle"), "-o", O("in.link")),
             ("-", "-o", O("in.pickle"))):
    r = imp("-q", *args, stdin=O("in.pickle"))
    what = "%s (%s)" % (name, " ".join(args))
    if r.rc != 2:
        fail("%s: exit %d, expected 2" % (what, r.rc))
    if r.err_lines() != 1:
        fail("%s: not one line: %s" % (what, r.errtext))
    if "is the input snapshot" not in r.errtext:
        fail("%s: %s" % (what, r.errtext))
    if not same(O("in.pickle"), snap):
        fail("%s: the snapshot was overwritten" % what)
# With --device all, the per-device name can be the input's.
shutil.copyfile(O("in.pickle"), O("s.0.pickle"))
r = imp("-q", O("s.0.pickle"), "--device", "all", "-o", O("s.pickle"))
if r.rc != 2:
    fail("%s (--device all): exit %d, expected 2: %s" % (name, r.rc, r.errtext))
if not same(O("s.0.pickle"), snap):
    fail("%s (--device all): the snapshot was overwritten" % name)
for n in os.listdir(o):
    if n.endswith(".pickle") or n == "in.link":
        os.unlink(O(n))

# 5g. Byte-count options out of range are usage errors (exit 2, one line,
# the range named), not a data error or no limit at all.
for opt in ("--max-input=-1", "--max-input=0", "--max-input=1e31",
            "--max-input=10000000000000000000000000000000",
            "--max-memory=-5", "--max-memory=4611686018427387905",
            "--max-memory=lots"):
    r = imp("-q", opt, snap, "-o", O("opt.trace"))
    if r.rc != 2:
        fail("%s: exit %d, expected 2: %s" % (opt, r.rc, r.errtext))
    if r.err_lines() != 1:
        fail("%s: not one line: %s" % (opt, r.errtext))
    if not re.search(r"takes a number of bytes from [01].* to "
                     r"4611686018427387904 \(2\^62\)", r.errtext):
        fail("%s: %s" % (opt, r.errtext))
    if os.path.exists(O("opt.trace")):
        fail("%s: wrote a trace" % opt)
r = imp("-q", "--max-input=4611686018427387904", snap, "-o", O("opt.trace"))
if r.rc:
    fail("--max-input=2^62: exit %d" % r.rc)
if os.path.exists(O("opt.trace")):
    os.unlink(O("opt.trace"))

# 5h. A read error names the input, not the output.
if os.access("/proc/self/mem", os.R_OK):
    r = imp("-q", "/proc/self/mem", "-o", O("mem.trace"))
    if r.rc != 1:
        fail("/proc/self/mem: exit %d, expected 1" % r.rc)
    if not r.errtext.startswith("gpubuddy-import-torch: cannot read /proc/self/mem: "):
        fail("/proc/self/mem: %s" % r.errtext)
    if os.path.exists(O("mem.trace")):
        fail("/proc/self/mem: wrote a trace")

# 6. --help and --version.
r = imp("--help")
if "--device" not in r.out.decode():
    fail("--help does not list --device")
r = imp("--version")
if not re.match(r"gpubuddy-import-torch [0-9]", r.out.decode()):
    fail("--version: %s" % r.out.decode())

to_zygote.close()
os.waitpid(zpid, 0)
shutil.rmtree(tmp)
if fails:
    print("%d failure(s)" % fails)
    sys.exit(1)
print("ok")
