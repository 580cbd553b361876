"""Smoke test of rt-load (ctest label integration): a real cluster from
tests/integration/rtcluster.py, a 3-second mixed run with a preload, and
the checks that every operation completed with no error and that the JSON
summary and the CSV are written. Exit 0 on success.

    rt_load_smoke.py --rt-load build/tools/rt-load --workdir /tmp/x
"""

import argparse
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from rtcluster import Cluster  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rt-load", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    if os.path.exists(args.workdir):
        shutil.rmtree(args.workdir)
    os.makedirs(args.workdir)
    out_json = os.path.join(args.workdir, "summary.json")
    out_csv = os.path.join(args.workdir, "run.csv")
    # No balancing policy: a hot-range split started near the end of the
    # 3 s run answers a few writes 503 in its window, which rt-load, then
    # stopping, does not retry; the balancer has tests of its own.
    c = Cluster(os.path.join(args.workdir, "cluster"), n_ps=3,
                log_level="warn", extra_args={"master": ["--policy", "none"]})
    c.start()
    try:
        argv = [args.rt_load, "--endpoint", c.table_endpoint,
                "--create-table", "--table", "smoke", "--preload", "500",
                "--mix", "insert=1,get=3,upsert=1,merge=1,update=1,page=1",
                "--page-size", "100", "--workers", "8", "--duration", "3",
                "--master-http", c.master_http_addr, "--json", out_json,
                "--csv", out_csv]
        print("+ " + " ".join(argv), flush=True)
        r = subprocess.run(argv, timeout=120)
        with open(out_json) as f:
            s = json.load(f)
        with open(out_csv) as f:
            rows = f.read().splitlines()
    finally:
        c.stop(check=False)
    c.check_sanitizers()
    c.check_exits()
    a = s["all"]
    print("ops %d (%.0f/s), ok %d, errors %d, 503 %d, rows %d"
          % (a["ops"], a["ops_per_s"], a["ok"], a["errors"],
             a["throttled"], len(rows) - 1))
    assert r.returncode == 0, "rt-load exited %d" % r.returncode
    assert a["ops"] > 100, "too few operations: %d" % a["ops"]
    assert a["errors"] == 0, "errors: %r" % s["errors"]
    assert a["throttled"] == 0
    assert a["ok"] + a["conflict"] + a["not_found"] == a["ops"]
    assert a["conflict"] == 0 and a["not_found"] == 0, a
    assert set(s["ops"]) == {"insert", "get", "upsert", "merge", "update",
                             "page"}, s["ops"]
    assert s["ops"]["page"]["entities"] >= s["ops"]["page"]["ops"] * 100
    assert len(rows) >= 4 and rows[0].startswith("second,unix_time")
    assert s["ranges_start"] >= 1
    print("1 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
