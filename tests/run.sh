#!/usr/bin/env bash
# The test command (README "Quick start", line 2; .ci/run runs exactly this).
#
# Usage: tests/run.sh [CTEST ARGS...]     e.g. tests/run.sh -L unit
#                                              tests/run.sh -R integration -V
#
# 1. installs missing Debian packages: the build set plus libcmocka-dev,
#    python3-azure, python3-pytest, python3-requests, iproute2 (deploy/install-deps.sh);
# 2. builds with AddressSanitizer + UndefinedBehaviorSanitizer (Debug) in
#    build/sanitize (env RT_TEST_BUILD_DIR to change);
# 3. runs ctest --output-on-failure --timeout 600 plus your arguments, and
#    exits with ctest's status.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR=${RT_TEST_BUILD_DIR:-build/sanitize}

say() { printf '[tests/run.sh] %s\n' "$*" >&2; }
case "${1:-}" in
-h | --help)
    sed -n '2,12s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
    exit 0
    ;;
esac

t0=$SECONDS
./deploy/install-deps.sh --test
t1=$SECONDS

say "configuring $BUILD_DIR (Debug, -fsanitize=address,undefined)"
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Debug \
    -DRT_SANITIZE=address,undefined
cmake --build "$BUILD_DIR" -j"$(nproc)"
t2=$SECONDS

# Sanitizer reports go to each process's stderr: unit tests fail through
# ctest, and the integration harness scans every daemon's stderr.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

say "deps $((t1 - t0))s, build $((t2 - t1))s; running ctest"
# ctest's summary stays the last thing printed (CI reads its closing lines).
rc=0
ctest --test-dir "$BUILD_DIR" --output-on-failure --timeout 600 \
    --no-tests=error "$@" || rc=$?
exit "$rc"
