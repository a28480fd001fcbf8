#!/usr/bin/env bash
# Loopback goodput and CPU per MB: quiche client <-> quiche server against
# quicbench fetch <-> quicbench serve (quic-go, h3), interleaved ROUNDS
# times in one run. Goodput is body bytes over the request's time (request
# start to last byte); CPU is the server process's (from /proc, over the
# transfer) and the client's own (its record / quicbench's --json).
#
#   bash peers/quiche/scripts/goodput.sh [SIZE] [ROUNDS]   (default 100MB 3)
set -euo pipefail
SIZE=${1:-100MB} ROUNDS=${2:-3}
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(cd "$HERE/../../target/release" && pwd)
QB=${QUICBENCH_BIN:-$HERE/../../../bin/quicbench}
W=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$W"' EXIT
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$W/key.pem" \
	-out "$W/cert.pem" -days 1 -subj /CN=localhost -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" 2>/dev/null
"$QB" serve --host 127.0.0.1 --port 0 --plain-port 0 --protocols h3 > "$W/qb.out" 2>/dev/null &
pids+=($!); qbpid=$!
printf '{"host":"127.0.0.1","port":0,"cert":"%s","key":"%s","cc":"cubic","socket_buffer":7340032}' \
	"$W/cert.pem" "$W/key.pem" > "$W/conf.json"
# The server's stdin is a fifo this script holds open: it stops when the
# script exits.
mkfifo "$W/in"
"$B/qb-quiche-server" --config "$W/conf.json" < "$W/in" > "$W/q.out" &
qspid=$!
pids+=($qspid)
exec 9> "$W/in"
for _ in $(seq 300); do [ -s "$W/q.out" ] && grep -q 'QUIC/UDP' "$W/qb.out" && break; sleep 0.1; done
qbport=$(grep -o 'QUIC/UDP *127.0.0.1:[0-9]*' "$W/qb.out" | grep -o '[0-9]*$')
qport=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["ready"]["port"])' "$W/q.out")
cpu() { awk '{print ($14+$15)*10}' "/proc/$1/stat"; } # ms (USER_HZ 100)
python3 - "$W/cert.pem" "$qport" "$SIZE" > "$W/req.json" <<'PY'
import json, sys
print(json.dumps({"host": "127.0.0.1", "port": int(sys.argv[2]), "server_name": "localhost",
                  "ca_pem": open(sys.argv[1]).read(), "paths": ["/bytes/" + sys.argv[3]], "rcvbuf": 7340032}))
PY
echo "stack goodput_mbps server_cpu_ms_per_MB client_cpu_ms_per_MB"
for r in $(seq "$ROUNDS"); do
	c0=$(cpu "$qbpid")
	"$QB" fetch --proto h3 --insecure --json --addr "127.0.0.1:$qbport" "/bytes/$SIZE" > "$W/qb.json"
	c1=$(cpu "$qbpid")
	python3 - "$W/qb.json" "$((c1 - c0))" quicbench <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); r = d["requests"][0]; mb = r["bytes"] / 1e6
cli = (d["cpu"]["ClientUser"] + d["cpu"]["ClientSys"]) / 1e6
print(f'{sys.argv[3]} {r["bytes"]*8/((r["end"]-r["start"])/1e9)/1e6:.0f} {int(sys.argv[2])/mb:.2f} {cli/mb:.2f} {d.get("error") or ""}')
PY
	c0=$(cpu "$qspid")
	/usr/bin/time -f "%U %S" -o "$W/time" "$B/qb-quiche-client" "$W/req.json" > "$W/q.json"
	c1=$(cpu "$qspid")
	python3 - "$W/q.json" "$((c1 - c0))" quiche "$W/time" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); r = d["requests"][0]; mb = r["bytes"] / 1e6
u, s = map(float, open(sys.argv[4]).read().split()[-2:])
print(f'{sys.argv[3]} {r["bytes"]*8/((r["end"]-r["start"])/1e9)/1e6:.0f} {int(sys.argv[2])/mb:.2f} {(u+s)*1000/mb:.2f} {d.get("error") or ""}')
PY
done
