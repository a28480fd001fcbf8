#!/usr/bin/env bash
# Measures the quiche peer's pacing: a download through a rate-limited,
# delayed path (quicbench emulate: namespaces of its own, removed at exit),
# with every datagram's release time (SendInfo.at or the token bucket's) and
# real departure time logged by the server (QB_QUICHE_SENDLOG). Prints, per
# congestion control, the lateness of departures against their release times
# and the distribution of gaps between departures.
#
#   sudo bash peers/quiche/scripts/pacing.sh [SIZE] [RATE] [DELAY]
#   (defaults: 20MB 50mbit 20ms; needs root, bin/quicbench or $QUICBENCH_BIN,
#   openssl, python3, and the release build of the peer)
set -euo pipefail
SIZE=${1:-20MB} RATE=${2:-50mbit} DELAY=${3:-20ms}
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(cd "$HERE/../../target/release" && pwd)
QB=${QUICBENCH_BIN:-$HERE/../../../bin/quicbench}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$W/key.pem" \
	-out "$W/cert.pem" -days 1 -subj /CN=localhost -addext "subjectAltName=DNS:localhost" 2>/dev/null
# The server side (run by quicbench emulate in the server namespace; its
# stdin stays open while sleep runs).
cat > "$W/srv.sh" <<'SH'
printf '{"host":"%s","port":4433,"cert":"%s","key":"%s","cc":"%s","socket_buffer":8388608}' \
	"$QUICBENCH_SERVER_ADDR" "$W/cert.pem" "$W/key.pem" "$CC" > "$W/$CC/conf.json"
sleep 3600 | QB_QUICHE_SENDLOG="$W/$CC" "$B/qb-quiche-server" --config "$W/$CC/conf.json" > "$W/$CC/out" 2> "$W/$CC/err"
SH
cat > "$W/cli.sh" <<'SH'
for _ in $(seq 100); do [ -s "$W/$CC/out" ] && break; sleep 0.1; done
python3 - > "$W/$CC/req.json" <<PY
import json
print(json.dumps({"host": "$QUICBENCH_SERVER_ADDR", "port": 4433, "server_name": "localhost",
                  "ca_pem": open("$W/cert.pem").read(), "paths": ["/bytes/$SIZE"],
                  "congestion_control": "$CC", "rcvbuf": 8 << 20}))
PY
"$B/qb-quiche-client" "$W/$CC/req.json" > "$W/$CC/rec.json"
sleep 2 # the server drains the connection and flushes its log
SH
export W B SIZE
for cc in cubic bbr reno; do
	mkdir -p "$W/$cc"
	CC=$cc "$QB" emulate --link "delay $DELAY rate $RATE" --server "bash $W/srv.sh" -- bash "$W/cli.sh" 2>/dev/null
	sleep 0.5
	python3 - "$W/$cc" "$cc" "$RATE" <<'PY'
import glob, json, sys
d, cc, rate = sys.argv[1:4]
rec = json.load(open(d + "/rec.json"))
r = rec["requests"][0]
gp = r["bytes"] * 8 / ((r["end"] - r["start"]) / 1e9) / 1e6
rows = []
for f in glob.glob(d + "/*.sendlog"):
    rows += [tuple(map(int, l.split())) for l in open(f)]
rows.sort(key=lambda x: x[1])
late = sorted(max(0, s - a) / 1e3 for a, s, n in rows)
early = sum(1 for a, s, n in rows if s < a - 50_000)
gaps = sorted((rows[i][1] - rows[i - 1][1]) / 1e3 for i in range(1, len(rows)) if rows[i][2] > 1000)
q = lambda v, p: v[min(len(v) - 1, int(p * len(v)))] if v else 0
big = [n for a, s, n in rows if n > 1000]
burst = 0; run = 0
for i in range(1, len(rows)):
    run = run + 1 if rows[i][1] - rows[i - 1][1] < 20_000 else 0
    burst = max(burst, run + 1)
print(f"{cc}: {rec.get('error') or 'ok'}; goodput {gp:.1f} Mbit/s over {rate}; {len(rows)} datagrams "
      f"({len(big)} full-size); left before release time (beyond 50 us): {early}; "
      f"lateness us p50 {q(late,.5):.0f} p90 {q(late,.9):.0f} p99 {q(late,.99):.0f} max {late[-1] if late else 0:.0f}; "
      f"gap between full-size departures us p10 {q(gaps,.1):.0f} p50 {q(gaps,.5):.0f} p90 {q(gaps,.9):.0f}; "
      f"longest run of departures <20 us apart: {burst}; server: {open(d + '/err').read().strip()}")
PY
done
