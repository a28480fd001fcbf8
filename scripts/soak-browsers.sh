#!/usr/bin/env bash
# Soak of persistent browsers (issue 28, item 4): runs scripts/soak-browsers.yaml
# on 4 testbeds at once for DURATION seconds (default 8000: 2 h 13 min), samples
# every 60 s the memory and open files of the runner, the agents, the servers and
# each browser's process group (procs.csv), then prints the slopes
# (scripts/soak-slopes.py). As root, from the repository root:
#
#   bash scripts/soak-browsers.sh [DURATION] [OUTDIR]
#
# QUICBENCH names the binary (default ./bin/quicbench). The samples themselves
# record the browser's and the agent's memory and fds (docs/metrics.md,
# "Persistent browsers"), which soak-slopes.py also fits.
set -euo pipefail
dur=${1:-8000}
out=${2:-soak-browsers}
exe=$(readlink -f "${QUICBENCH:-./bin/quicbench}")
mkdir -p "$out"
rm -f "$out/soak.db" "$out/procs.csv"

# pss_kb PID: the proportional set size of one process, in kB (0 for a
# process without one, a zombie or one that ended: always one number, or the
# arithmetic below would end the sampler). awk prints its END line even when
# the file has gone, so its output is taken as it is, never followed by a
# second number.
pss_kb() {
	local v
	v=$(awk '/^Pss:/ {v = $2} END {print v + 0}' "/proc/$1/smaps_rollup" 2>/dev/null)
	echo "${v:-0}"
}
fds() { ls "/proc/$1/fd" 2>/dev/null | wc -l; }
rss_kb() {
	local v
	v=$(awk '/^VmRSS:/ {v = $2} END {print v + 0}' "/proc/$1/status" 2>/dev/null)
	echo "${v:-0}"
}

sample() {
	local now load
	now=$(date +%s)
	load=$(cut -d' ' -f1 /proc/loadavg)
	# this soak's quicbench processes (its binary): the runner, the agents,
	# the servers
	local agents=""
	while read -r pid args; do
		case "$args" in
		"$exe run "*) kind=runner ;;
		"$exe agent"*) kind=agent agents="$agents $pid" ;;
		"$exe serve "*) kind=server ;;
		*) continue ;;
		esac
		echo "$now,$load,$kind,$pid,$(rss_kb "$pid"),$(rss_kb "$pid"),$(fds "$pid"),1"
	done < <(ps -eo pid=,args=)
	# browsers: each process group led by a chromium or firefox whose parent
	# is an agent; memory and fds summed over the group
	for agent in $agents; do
		for leader in $(pgrep -P "$agent" || true); do
			comm=$(cat "/proc/$leader/comm" 2>/dev/null || true)
			case "$comm" in chromium | firefox-esr | firefox*) ;; *) continue ;; esac
			local pss=0 rss=0 nfd=0 n=0
			for p in $(pgrep -g "$leader" || true); do
				pss=$((pss + $(pss_kb "$p")))
				rss=$((rss + $(rss_kb "$p")))
				nfd=$((nfd + $(fds "$p")))
				n=$((n + 1))
			done
			echo "$now,$load,$comm,$leader,$rss,$pss,$nfd,$n"
		done
	done
}

echo "time,load1,kind,pid,rss_kb,pss_kb,fds,procs" >"$out/procs.csv"
(
	# a reading that fails (a process gone mid-reading) is skipped, never
	# the end of the sampler
	while sleep 60; do sample >>"$out/procs.csv" || true; done
) &
sampler=$!
trap 'kill $sampler 2>/dev/null || true' EXIT
start=$(date +%s)
timeout --signal=INT --kill-after=120 "$dur" "$exe" run --plan scripts/soak-browsers.yaml --parallel 4 \
	-o "$out/soak.db" --no-report --lines >"$out/run.log" 2>&1 || true
echo "ran $(($(date +%s) - start)) s; $(grep -c . "$out/procs.csv") process readings"
kill $sampler 2>/dev/null || true
python3 scripts/soak-slopes.py "$out/soak.db" "$out/procs.csv" | tee "$out/slopes.txt"
