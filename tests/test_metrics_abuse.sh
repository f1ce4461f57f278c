#!/bin/sh
# SPDX-License-Identifier: MIT
# test_metrics_abuse.sh: what clients can do to gpubuddy-relay --metrics.
#   1. A client that sends its request one byte a second, and 20 (then
#      70) connections that send nothing, do not hold up a scrape: it is
#      answered while they wait (one slow client blocked every scrape for
#      over 30 s, and 20 idle ones delayed it by 40 s).
#   2. Other methods get 405 with "Allow: GET"; an empty request line, a
#      NUL in the path and binary input get 400 as soon as they are seen,
#      not 404 after a 2 s timeout; a token is compared exactly.
#   3. The slow client is cut off at its deadline.
# Every wait is bounded (a client gives up after 10 s: a stall fails).
set -u
here=$(pwd)
relay=$here/tools/gpubuddy-relay
churn=$here/samples/gpubuddy-sample-churn
[ -x "$relay" ] && [ -x "$churn" ] || { echo "SKIP: not built"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpb-mabuse.XXXXXX")
pids=
cleanup() { for p in $pids; do kill $p 2>/dev/null; done; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
name=mabuse-$$
"$churn" --backend virtual --pool-size 16M --steps 100000000 --pace-us 500 \
  --publish "$name" --quiet > /dev/null 2>&1 &
pids="$pids $!"
"$relay" --metrics 127.0.0.1:0 --port-file "$tmp/port" --token s3cret -q 2> "$tmp/relay.err" &
pids="$pids $!"
i=0; while [ ! -s "$tmp/port" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
port=$(cat "$tmp/port" 2>/dev/null)
[ -n "$port" ] || { cat "$tmp/relay.err"; echo "FAIL: the relay wrote no port"; exit 1; }
sleep 0.3

python3 - "$port" "$name" <<'PY'
import socket, sys, threading, time
port, name = int(sys.argv[1]), sys.argv[2]
fails = []
AUTH = b"Authorization: Bearer s3cret\r\n"

def ask(raw, close_write=False):
    """Sends raw bytes; returns the answer (status line and all), or None
    when none came within 10 s."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        s.sendall(raw)
        if close_write:
            s.shutdown(socket.SHUT_WR)
        out = b""
        while True:
            b = s.recv(65536)
            if not b:
                return out
            out += b
    except socket.timeout:
        return None
    finally:
        s.close()

def status(ans):
    return ans.split(b"\r\n", 1)[0].decode("latin-1") if ans else "no answer"

def scrape(what):
    a = ask(b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + AUTH + b"\r\n")
    if not a or b" 200 " not in a.split(b"\r\n", 1)[0] or name.encode() not in a:
        fails.append("%s: scrape got %s" % (what, status(a)))

# 1. One byte a second, from a client that has started its request.
slow_ans = []
def slow():
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    s.sendall(b"GET /metrics HTTP/1.1\r\n")
    try:
        for _ in range(15):
            time.sleep(1)
            s.sendall(b"X")
        slow_ans.append(s.recv(4096))
    except socket.timeout:
        slow_ans.append(b"still waiting after 35 s")
    except OSError:
        slow_ans.append(b"HTTP/1.0 408 (cut off: reset)")
    s.close()
t = threading.Thread(target=slow)
t.start()
time.sleep(1.5)
scrape("beside a client sending 1 byte/s")
idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(20)]
scrape("behind 20 idle connections")
idle += [socket.create_connection(("127.0.0.1", port)) for _ in range(50)]
time.sleep(0.2)
scrape("behind 70 idle connections (more than the table holds)")
for s in idle:
    s.close()
t.join()
if not slow_ans or b" 408 " not in slow_ans[0].split(b"\r\n", 1)[0]:
    fails.append("the slow client was not cut off with 408: %r" % slow_ans[:1])

# 2. Answered at once, by what the bytes are. The connection stays open
#    (no end of headers is sent), so only a judgement answers it.
cases = [
    (b"POST /metrics HTTP/1.1\r\n", "405", b"Allow: GET"),
    (b"DELETE / HTTP/1.1\r\n", "405", b""),
    (b"\r\n\r\n", "400", b""),
    (b"GET /met\0rics HTTP/1.1\r\n", "400", b""),
    (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", "400", b""),
    (b"GET /other HTTP/1.1\r\n", "404", b""),
    (b"GET /metrics\r\n\r\n", "400", b""),
    (b"GET /metrics HTTP/1.1\r\nAuthorization: Bearer S3CRET\r\n\r\n", "401", b""),
    (b"GET /metrics HTTP/1.1\r\nAuthorization: Bearer s3cret2\r\n\r\n", "401", b""),
    (b"GET /metrics?x=1 HTTP/1.0\r\nauthorization:  bearer s3cret \r\n\r\n", "200", b"gpubuddy_"),
]
for raw, want, has in cases:
    a = ask(raw)
    st = status(a)
    if (" %s " % want) not in st + " " or (has and has not in a):
        fails.append("%r: want %s, got %s" % (raw[:40], want, st))
# A client that connects and says nothing before closing: no answer
# needed, and nothing else disturbed.
a = ask(b"", close_write=True)
scrape("after an empty connection")

for f in fails:
    print("FAIL:", f)
if fails:
    sys.exit(1)
print("ok: scrapes answered beside a slow client and 70 idle ones; "
      "405/400/404/401 at once")
PY
rc=$?
kill -0 $(echo $pids | cut -d' ' -f2) 2>/dev/null || { echo "FAIL: the relay died"; rc=1; }
[ $rc = 0 ] || tail -5 "$tmp/relay.err"
exit $rc
