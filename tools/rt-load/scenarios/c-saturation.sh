#!/usr/bin/env bash
# Seed experiment (c): saturating one partition. Open-loop inserts into a
# single PartitionKey at rising target rates (no retries, so every 503
# ServerBusy shows), then the same ramp as one run with a per-second CSV.
# Reports achieved ops/s, the share of throttled requests, p99 (from the
# intended send times) and operations never sent.
#
# Usage: c-saturation.sh [--out DIR] [--endpoint URL [--master-http H:P]]
#                        [--quick]
# Writes OUT/c-saturation.csv, OUT/c-saturation.{svg,png}.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
rt_scenario_init c-saturation "$@"

DUR=3s
((QUICK)) && DUR=1s
CSV=$OUT/c-saturation.csv
table=csat$$
"$RT_LOAD" --endpoint "$EP" --quiet --create-table --table "$table" \
    --requests 1 --mix get --workers 1 --duration 0 >/dev/null
i=0
for rate in 500 1000 2000 4000 8000 16000 32000; do
    i=$((i + 1))
    rt_step "$CSV" "target_per_s=$rate" --table "$table" --partitions 1 \
        --mix insert --rate "$rate" --connections 256 --retry none \
        --duration "$DUR" --warmup 500ms --timeout 10s \
        --insert-start $((i * 100000000))
done
cat >"$OUT/c-saturation.gp" <<GP
set datafile separator ','
set grid
set logscale x 2
set xlabel 'target inserts/s into one partition (open loop)'
set multiplot layout 1,2 title 'seed experiment (c): saturating one partition'
set ylabel 'ops/s'
set y2label 'share of requests answered 503'
set ytics nomirror
set y2tics
set y2range [0:1]
plot '$CSV' using 1:2 skip 1 with linespoints title 'achieved ops/s', \
     '$CSV' using 1:1 skip 1 with lines dt 2 title 'target', \
     '$CSV' using 1:8 skip 1 axes x1y2 with linespoints title '503 share'
unset y2label
unset y2tics
set ytics mirror
set ylabel 'p99 latency (ms, from intended send time)'
set logscale y
plot '$CSV' using 1:5 skip 1 with linespoints title 'p99', \
     '$CSV' using 1:4 skip 1 with linespoints title 'p50'
unset multiplot
GP
rt_gnuplot "$OUT/c-saturation.gp"
column -s, -t <"$CSV" | cut -c1-170
