#!/usr/bin/env bash
# Every C source against .clang-format (docs/STYLE.md §9, clang-format 14).
# Registered with ctest as "format"; run by hand to see the offending lines.
# Fix with: clang-format -i $(git ls-files '*.c' '*.h')
set -euo pipefail
cd "$(dirname "$0")/.."
cf=${CLANG_FORMAT:-$(command -v clang-format-14 || command -v clang-format || true)}
if [ -z "$cf" ]; then
    echo "check-format: clang-format not found (apt-get install clang-format)" >&2
    exit 1
fi
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    mapfile -t files < <(git ls-files '*.c' '*.h')
else
    mapfile -t files < <(find common frontend master partition-server tools bench \
        tests -name '*.[ch]' -not -path '*/build*')
fi
"$cf" --dry-run -Werror "${files[@]}"
echo "check-format: ${#files[@]} files match .clang-format"
