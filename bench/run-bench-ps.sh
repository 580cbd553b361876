#!/usr/bin/env bash
# Builds bench_ps, rt-master and rt-partition-server in a Release tree and
# runs the partition-server benchmark. Arguments go to bench_ps
# (e.g. --quick, --entities 200000, --json out.json, --keep, --dir DIR).
#
#   bench/run-bench-ps.sh --quick
#   BUILD_DIR=/tmp/rt-rel bench/run-bench-ps.sh --json /tmp/ps.json
#
# Env: BUILD_DIR (default <repo>/build-bench), JOBS (default 1: the machine
# has two cores and a benchmark build should not starve anything else).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
build=${BUILD_DIR:-$root/build-bench}
jobs=${JOBS:-1}

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --target bench_ps rt-master rt-partition-server \
    -j"$jobs" >/dev/null

echo "rangetable bench_ps  $(date -u +%Y-%m-%dT%H:%M:%SZ)  commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$root" diff --quiet 2>/dev/null || echo '+dirty')"
echo "host: $(nproc) cores, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
exec "$build/bench/bench_ps" --bin-dir "$build" "$@"
