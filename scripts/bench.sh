#!/usr/bin/env bash
# Runs quicbench's performance and fidelity benchmarks (as root) and prints
# their figures. Every target the project states is a benchmark here, never a
# timed test; figures are measured next to a baseline taken in the same run
# (veth, plain forwarding) where one exists, because shared machines are noisy.
#
#   bash scripts/bench.sh            # everything (about 10 minutes on 2 cores)
#   bash scripts/bench.sh emulator   # one group: emulator, endpoints, store, report, pipeline, capture
#   bash scripts/bench.sh quic-queue # an experiment, not in "all": see below
#
# Output: the `go test -bench` lines (custom units such as Gbit/s, p50-err-us,
# emu/veth-%, net-pct, taken-pct, s/report), also kept in bench-results.txt.
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
	# Cost: the CPU the emulator takes while carrying 100 Mbit/s, against the
	# kernel's own path (veth, tbf) in the same run.
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
case $group in all | capture)
	# capture: pcap: the tap's and the writer's CPU per packet, then goodput
	# and emulator CPU with and without a capture at 100 Mbit/s and 1 Gbit/s
	# (ratios within each round). The answer check (capture on vs off,
	# check-parallel style, about 3 minutes) is run by `bench.sh
	# capture-answer`.
	bench ./forward/ 'BenchmarkTapRecord' 2000000x
	bench ./capture/ 'BenchmarkWriteRecord' 2000000x
	bench ./capture/ 'BenchmarkCaptureCost' 5x
	;;
esac
case $group in capture-answer)
	go test -v -run '^$' -bench 'BenchmarkCaptureSameAnswer' -benchtime 1x -count 1 -timeout 60m ./runner/ 2>&1 | tee -a "$out"
	;;
esac
case $group in quic-queue)
	# Why quic-go through `delay 10ms` falls short of its veth goodput: the
	# same benchmark with quic-go as released and with a copy of it whose
	# per-connection queue of unprocessed packets (MaxConnUnprocessedPackets,
	# 256) holds 8192. The copy lives in a temporary directory and is used
	# through a go.work file there; the project and the module cache are not
	# changed. emu-rcvbuf-drops counts the datagrams the client namespace's
	# kernel dropped on a full socket buffer during the emulated transfers.
	qdir=$(go list -m -f '{{.Dir}}' github.com/quic-go/quic-go)
	qver=$(go list -m -f '{{.Version}}' github.com/quic-go/quic-go)
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	cp -r "$qdir" "$tmp/quic-go"
	chmod -R u+w "$tmp/quic-go"
	params=$tmp/quic-go/internal/protocol/params.go
	if ! grep -q '^const MaxConnUnprocessedPackets = 256$' "$params"; then
		echo "bench.sh: quic-go $qver does not define MaxConnUnprocessedPackets = 256 in $params; the experiment needs updating" >&2
		exit 1
	fi
	sed -i 's/^const MaxConnUnprocessedPackets = 256$/const MaxConnUnprocessedPackets = 8192/' "$params"
	printf 'go %s\n\nuse %s\n\nreplace github.com/quic-go/quic-go %s => %s\n' \
		"$(go list -m -f '{{.GoVersion}}')" "$PWD" "$qver" "$tmp/quic-go" >"$tmp/go.work"
	echo "-- quic-go $qver as released (queue of 256 unprocessed packets per connection)" | tee -a "$out"
	bench ./calibrate/ 'BenchmarkThroughput/quic' 3x
	echo "-- quic-go $qver with a queue of 8192" | tee -a "$out"
	GOWORK=$tmp/go.work bench ./calibrate/ 'BenchmarkThroughput/quic' 3x
	;;
esac
echo "figures kept in $out"
