#!/usr/bin/env bash
# Seed experiment (a): single-partition vs many-partition inserts and gets
# as concurrency grows. Two tables, one with every entity in one
# PartitionKey (--partitions 1), one spread over 1000; for each, inserts
# and point gets with 1, 4, 16 and 64 closed-loop workers.
#
# Usage: a-partitions.sh [--out DIR] [--endpoint URL [--master-http H:P]]
#                        [--quick]
# Without --endpoint it starts a local cluster (3 partition servers).
# Writes OUT/a-partitions.csv (one row per step) and
# OUT/a-partitions.{svg,png} (throughput and p99 against workers).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
rt_scenario_init a-partitions "$@"

DUR=3s
((QUICK)) && DUR=1s
CSV=$OUT/a-partitions.csv
step=0
for parts in 1 1000; do
    table=apart$parts$$
    "$RT_LOAD" --endpoint "$EP" --quiet --create-table --table "$table" \
        --partitions "$parts" --preload 5000 --requests 1 --mix get \
        --workers 1 --duration 0 >/dev/null
    for op in insert get; do
        for w in 1 4 16 64; do
            step=$((step + 1))
            rt_step "$CSV" "partitions=$parts op=$op workers=$w" \
                --table "$table" --partitions "$parts" --mix "$op" \
                --keys 5000 \
                --workers "$w" --duration "$DUR" --warmup 500ms \
                --insert-start $((step * 10000000))
        done
    done
done

cat >"$OUT/a-partitions.gp" <<GP
set datafile separator ','
set key top left
set grid
set logscale x 2
set xlabel 'concurrent workers'
set multiplot layout 1,2 title 'seed experiment (a): one partition vs 1000 partitions'
set ylabel 'ops/s'
plot for [k in "1:insert 1000:insert 1:get 1000:get"] \
  '$CSV' using (strcol(1).':'.strcol(2) eq k ? \$3 : NaN):4 skip 1 \
  with linespoints title sprintf('%s partition(s), %s', \
  substr(k,1,strstrt(k,':')-1), substr(k,strstrt(k,':')+1,99))
set ylabel 'p99 latency (ms)'
set logscale y
plot for [k in "1:insert 1000:insert 1:get 1000:get"] \
  '$CSV' using (strcol(1).':'.strcol(2) eq k ? \$3 : NaN):7 skip 1 \
  with linespoints title sprintf('%s partition(s), %s', \
  substr(k,1,strstrt(k,':')-1), substr(k,strstrt(k,':')+1,99))
unset multiplot
GP
rt_gnuplot "$OUT/a-partitions.gp"
column -s, -t <"$CSV" | cut -c1-150
