#!/usr/bin/env bash
# Seed experiment (b): entity group transactions of 1..100 inserts (one
# PartitionKey each, 100 partitions), 8 closed-loop workers: entities/s and
# latency per entity (transaction latency / batch size) by batch size.
#
# Usage: b-batch.sh [--out DIR] [--endpoint URL [--master-http H:P]] [--quick]
# Writes OUT/b-batch.csv and OUT/b-batch.{svg,png}. A server without $batch
# (501) shows up as errors and blank rows.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
rt_scenario_init b-batch "$@"

DUR=3s
((QUICK)) && DUR=1s
CSV=$OUT/b-batch.csv
table=bbatch$$
"$RT_LOAD" --endpoint "$EP" --quiet --create-table --table "$table" \
    --requests 1 --mix get --workers 1 --duration 0 >/dev/null || true
for n in 1 2 5 10 20 50 100; do
    rt_step "$CSV" "batch_size=$n" --table "$table" --partitions 100 \
        --mix batch --batch-size "$n" --workers 8 --duration "$DUR" \
        --warmup 500ms
done
# Per-entity latency columns.
python3 - "$CSV" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
out = [rows[0] + ["p50_ms_per_entity", "p99_ms_per_entity"]]
for r in rows[1:]:
    n = float(r[0])
    def per(x):
        return "%.4f" % (float(x) / n) if x else ""
    out.append(r + [per(r[3]), per(r[4])])
csv.writer(open(sys.argv[1], "w"), lineterminator="\n").writerows(out)
PY
cat >"$OUT/b-batch.gp" <<GP
set datafile separator ','
set grid
set logscale x
set xlabel 'operations per \$batch'
set multiplot layout 1,2 title 'seed experiment (b): batch size'
set ylabel 'entities/s'
plot '$CSV' using 1:3 skip 1 with linespoints title 'entities/s'
set ylabel 'latency per entity (ms)'
set logscale y
plot '$CSV' using 1:14 skip 1 with linespoints title 'p50 / batch size', \
     '$CSV' using 1:15 skip 1 with linespoints title 'p99 / batch size'
unset multiplot
GP
rt_gnuplot "$OUT/b-batch.gp"
column -s, -t <"$CSV" | cut -c1-170
