#!/usr/bin/env bash
# Stock Pulsar 4.0.8 against the plugin, same distribution and machine, in one run.
#   benchmarks/run.sh              full run (about 60 minutes on 2 cores)
#   benchmarks/run.sh --quick      a short run to check the setup
#   benchmarks/run.sh --rounds 3   more alternating rounds
#   benchmarks/run.sh --open-loop-commits 100000
#                                  open-loop commits per side and rate over the run (2 000 with --quick)
#   benchmarks/run.sh --thread-cpu [warm-up seconds]
#                                  broker CPU per transaction by thread, stock against the plugin
#   benchmarks/run.sh --latency-probe [commits per side] [warm-up seconds] [open-loop share %]
#                                  whether the plugin's slowest commits fall on its state-topic writes
#                                  (sequential commits, or open loop at a share of stock's rate)
#   benchmarks/run.sh --cold-read-probe [records] [reads]
#                                  point reads of a compacted state topic's records by message id
#   benchmarks/run.sh --restore-at-scale [outcomes in millions]
#                                  a coordinator keeping 100 M outcomes opened on a real broker
#   benchmarks/run.sh --slice-profile <recording.jfr> [--frames N] [--brief] <HH:mm:ss.SSS-HH:mm:ss.SSS>...
#                                  what a broker ran in one slice, from its flight recording
#   benchmarks/run.sh --soak [minutes] [memory bound in MiB]
#                                  the window observed: full rate for 30 min, memory holding about a
#                                  minute, every probe retried at the end (docs/performance.md)
# The last line printed is: RESULT p50_ratio=... (see docs/performance.md).
set -euo pipefail
cd "$(dirname "$0")/.."
# Reading a recording needs no build (and must not rebuild the classes of a benchmark running beside it).
if [[ "${1:-}" != "--slice-profile" ]]; then
    mvn -B -q -DskipTests package
fi
work="$PWD/benchmarks/target/runs"
mkdir -p "$work"
main=io.github.txnpreserver.bench.Benchmark
if [[ "${1:-}" == "--thread-cpu" ]]; then
    main=io.github.txnpreserver.bench.ThreadCpuProbe
    shift
elif [[ "${1:-}" == "--latency-probe" ]]; then
    main=io.github.txnpreserver.bench.LatencyProbe
    shift
elif [[ "${1:-}" == "--restore-at-scale" ]]; then
    main=io.github.txnpreserver.bench.RestoreAtScale
    shift
elif [[ "${1:-}" == "--soak" ]]; then
    main=io.github.txnpreserver.bench.Soak
    shift
elif [[ "${1:-}" == "--slice-profile" ]]; then
    main=io.github.txnpreserver.bench.SliceProfile
    shift
elif [[ "${1:-}" == "--cold-read-probe" ]]; then
    main=io.github.txnpreserver.bench.ColdReadProbe
    shift
fi
exec java ${BENCH_JAVA_OPTS:-} -Xms2g -Xmx2g -XX:+UseSerialGC \
    -Dpulsar.distribution.archive="$PWD/integration-tests/target/distribution/pulsar-server-distribution-4.0.8-bin.tar.gz" \
    -Dtxnpreserver.repo.root="$PWD" \
    -Dtxnpreserver.work.dir="$work" \
    -Dorg.slf4j.simpleLogger.defaultLogLevel=error \
    -cp "benchmarks/target/*:benchmarks/target/lib/*" \
    "$main" "$@"
