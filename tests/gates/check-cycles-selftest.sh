#!/usr/bin/env bash
# Shows that check-cycles.py catches a cycle: builds an archive whose two
# objects call each other (must fail) and one where the calls go one way
# (must pass).
# Usage: check-cycles-selftest.sh PYTHON CC NM WORKDIR
set -euo pipefail
py=$1 cc=$2 nm=$3 dir=$4
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir"

printf 'int b(int);\nint a(int x) { return x ? b(x - 1) : 0; }\n' >a.c
printf 'int a(int);\nint b(int x) { return x ? a(x - 1) : 1; }\n' >b.c
printf 'int c(int x) { return x; }\n' >c.c
printf 'int c(int);\nint d(int x) { return c(x) + 1; }\n' >d.c
for f in a b c d; do "$cc" -c "$f.c" -o "$f.o"; done
ar rcs cyc.a a.o b.o
ar rcs dag.a c.o d.o

if "$py" "$here/check-cycles.py" --nm "$nm" cyc.a >cyc.out 2>&1; then
    echo "FAIL: a.o <-> b.o not reported as a cycle"; cat cyc.out; exit 1
fi
grep -q "a.o" cyc.out && grep -q "b.o" cyc.out ||
    { echo "FAIL: report does not name the files"; cat cyc.out; exit 1; }
"$py" "$here/check-cycles.py" --nm "$nm" dag.a ||
    { echo "FAIL: a one-way call reported as a cycle"; exit 1; }
echo "ok: cycle caught, one-way calls accepted"
