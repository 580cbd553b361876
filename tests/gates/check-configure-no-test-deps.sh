#!/usr/bin/env bash
# README line 1 must work on a machine where line 2 never ran: the build
# must configure without the test-only packages. This hides cmocka (the
# only test package the build looks for) from pkg-config and configures a
# fresh build tree twice, as deploy/run-local.sh does (RT_TESTS=OFF) and
# with the default (RT_TESTS=AUTO, which must then leave the tests out),
# and builds the first (Release, as line 1 does).
# It also checks that deploy/run-local.sh asks install-deps.sh for the
# build packages only.
#
# Usage: tests/gates/check-configure-no-test-deps.sh [WORKDIR]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
work=${1:-$(mktemp -d)}
mkdir -p "$work"
fail() {
    echo "check-configure-no-test-deps: $*" >&2
    exit 1
}

# A pkg-config search path with every .pc file but the test-only ones.
pcdir=$work/pkgconfig
rm -rf "$pcdir"
mkdir -p "$pcdir"
IFS=: read -r -a dirs <<<"$(pkg-config --variable pc_path pkg-config)"
for d in "${dirs[@]}"; do
    [[ -d "$d" ]] || continue
    for pc in "$d"/*.pc; do
        [[ -e "$pc" ]] || continue
        case "$(basename "$pc")" in
        cmocka.pc) ;;
        *) [[ -e "$pcdir/$(basename "$pc")" ]] || ln -s "$pc" "$pcdir/" ;;
        esac
    done
done
export PKG_CONFIG_LIBDIR=$pcdir
pkg-config --exists cmocka && fail "cmocka is still visible"

# The configure command of deploy/run-local.sh, read from the script itself.
line=$(grep -E '^\s*cmake -S \. -B "\$BUILD_DIR"' deploy/run-local.sh) ||
    fail "deploy/run-local.sh has no 'cmake -S . -B \"\$BUILD_DIR\"' line"
[[ "$line" == *"-DRT_TESTS=OFF"* ]] ||
    fail "deploy/run-local.sh does not configure with -DRT_TESTS=OFF"
cmake -S . -B "$work/line1" -DCMAKE_BUILD_TYPE=Release -DRT_TESTS=OFF \
    >"$work/line1.log" 2>&1 || {
    cat "$work/line1.log" >&2
    fail "configure as README line 1 does failed without test packages"
}

# ... and builds there: a Release build (-O2) warns where the sanitizer
# build does not (format truncation, a variable only an assertion reads),
# and -Werror makes that a broken line 1. Every target, not only the four
# run-local.sh builds, so a tool that will join them is covered too.
cmake --build "$work/line1" -j"$(nproc)" >"$work/line1-build.log" 2>&1 || {
    grep -E -B2 -A8 "error|warning" "$work/line1-build.log" | head -60 >&2
    fail "the Release build of README line 1 failed"
}

cmake -S . -B "$work/auto" -DCMAKE_BUILD_TYPE=Release >"$work/auto.log" 2>&1 || {
    cat "$work/auto.log" >&2
    fail "default configure failed without test packages"
}
grep -q "test suite is not configured" "$work/auto.log" ||
    fail "default configure did not say it left the tests out"
[[ ! -e "$work/auto/tests/CTestTestfile.cmake" ]] ||
    ! grep -q "add_test" "$work/auto/tests/CTestTestfile.cmake" ||
    fail "tests were configured although cmocka is hidden"

# run-local.sh installs the build packages only.
grep -q 'deploy/install-deps.sh' deploy/run-local.sh ||
    fail "deploy/run-local.sh does not call deploy/install-deps.sh"
if grep -E 'install-deps\.sh.*--test' deploy/run-local.sh >/dev/null; then
    fail "deploy/run-local.sh installs the test packages"
fi
echo "check-configure-no-test-deps: line 1 configures and builds without test packages"
[[ -n "${1:-}" ]] || rm -rf "$work"
