#!/usr/bin/env bash
# Runs quicbench's performance and fidelity benchmarks (as root) and prints
# their figures. Every target the project states is a benchmark here, never a
# timed test; figures are measured next to a baseline taken in the same run
# (veth, plain forwarding) where one exists, because shared machines are noisy.
#
#   bash scripts/bench.sh            # everything (about 10 minutes on 2 cores)
#   bash scripts/bench.sh emulator   # one group: emulator, endpoints, store, report, pipeline
#
# Output: the `go test -bench` lines (custom units such as Gbit/s, p50-err-us,
# emu/veth-%, pct-core, s/report), also kept in bench-results.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
	echo "bench.sh: run as root (the emulator benchmarks build namespaces)" >&2
	exit 1
fi
out=${BENCH_OUT:-bench-results.txt}
group=${1:-all}
: >"$out"

bench() { # package, pattern, benchtime
	echo "== $1 $2" | tee -a "$out"
	go test -run '^$' -bench "$2" -benchtime "$3" -count 1 -timeout 30m "$1" 2>&1 |
		grep -E '^(Benchmark|ok|FAIL|---|\s+\S+_test.go)' | tee -a "$out"
}

case $group in all | pipeline)
	# Allocation-free hot path: one op = one packet through a pipeline.
	bench ./emu/pipeline/ 'BenchmarkPipeline' 200000x
	bench ./tun/offload/ 'BenchmarkSegment|BenchmarkCoalesce' 20000x
	;;
esac
case $group in all | emulator)
	# Fidelity: delay precision (idle and under 100 Mbit/s of load, next to
	# the veth floor), delivered rate at 10/100/1000 Mbit/s, loss intervals.
	bench ./calibrate/ 'BenchmarkDelayPrecision|BenchmarkDeliveredRate|BenchmarkLossInterval' 1x
	# Speed: TCP, TCP+TLS and quic-go through `delay 10ms` vs a veth pair.
	bench ./calibrate/ 'BenchmarkThroughput' 2x
	# Cost: forwarder CPU while carrying 100 Mbit/s.
	bench ./calibrate/ 'BenchmarkEmulatorCPU' 1x
	# Forwarder variants (offload vs one packet per syscall).
	# (the offload-nort and offload-noadvance variants are left out: comparisons, slow)
	bench ./forward/ 'BenchmarkTCPThroughput/(offload|plain)/' 3000x
	;;
esac
case $group in all | endpoints)
	# Each protocol's goodput over the unimpaired emulated link.
	bench ./endpoint/ 'BenchmarkGoodputAcrossTestbed' 3x
	;;
esac
case $group in all | store)
	bench ./store/ 'BenchmarkInsertSample|BenchmarkLoadDataset100kMixed' 1x
	;;
esac
case $group in all | report)
	bench ./report/ 'BenchmarkHTML100k|BenchmarkText100k' 1x
	;;
esac
echo "figures kept in $out"
