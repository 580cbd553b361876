#!/usr/bin/env bash
# Seed experiment (d): append-only vs prepend-only vs random keys. Every
# insert is a new PartitionKey (--partitions 0): sequential ascending keys
# (timestamps as PK, all writes at the end of the key space), descending
# (prepend), or hashed (spread). 32 closed-loop workers each; a per-second
# CSV and plot per run (with the table's range count and the master's
# split/move events when it reports them), and a summary row per run.
#
# Usage: d-append.sh [--out DIR] [--endpoint URL [--master-http H:P]] [--quick]
# Writes OUT/d-append.csv, OUT/d-run-<pattern>.{csv,svg,png}.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
rt_scenario_init d-append "$@"

DUR=8s
((QUICK)) && DUR=2s
CSV=$OUT/d-append.csv
for pat in append prepend random; do
    case $pat in
    append) args=(--pk-scheme seq --dist seq-asc) ;;
    prepend) args=(--pk-scheme seq --dist seq-desc) ;;
    random) args=(--pk-scheme hash --dist uniform) ;;
    esac
    table=d$pat$$
    rt_step "$CSV" "pattern=$pat" --create-table --table "$table" \
        --partitions 0 --mix insert "${args[@]}" --workers 32 \
        --duration "$DUR" --warmup 1s --plot "$OUT/d-run-$pat" --label "d: $pat"
done
column -s, -t <"$CSV" | cut -c1-150
