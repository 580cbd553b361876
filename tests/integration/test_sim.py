"""rt-sim end to end (tools/rt-sim/README.md): a trace recorded on a real
cluster (rtcluster.py, rt-master --trace, rt-load as the client) replayed
offline.

1. Validation: the master records while rt-load drives one table until
   the default policy splits it (and moves a half); `rt-sim validate`
   replays the trace under the recorded policy and finds every recorded
   policy decision (splits at the same keys, moves to the same servers)
   within one decision interval.
2. Determinism: the same trace, policy and seed give byte-identical
   decisions.jsonl, for a replay and for a synthetic workload.
3. compare: a quick run of default against none on synthetic workloads
   writes compare.csv, each policy's metrics.csv, decisions.jsonl and a
   keyviz.json in the dashboard's /api/history and /api/events shapes.
"""

import csv
import json
import shutil
import os
import signal
import subprocess
import time
import urllib.request

import pytest

from rtcluster import started

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def build_dir():
    return os.environ.get("RT_BUILD_DIR") or os.path.join(
        os.path.dirname(__file__), "..", "..", "build", "dev")


def rt_sim(*args, check=True):
    r = subprocess.run([os.path.join(build_dir(), "tools", "rt-sim")] +
                       [str(a) for a in args],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=300)
    if check:
        assert r.returncode == 0, r.stdout
    return r


def wait_for(pred, timeout, what):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError("timed out waiting for " + what)


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    """A trace of 3 servers at RF 1 under the default policy with a low
    split threshold, recorded while rt-load inserts until a policy split
    (and, when it comes, a move) is done."""
    path = str(tmp_path_factory.mktemp("sim-trace") / "run.rttrace")
    for c in started(tmp_path_factory, "sim", n_ps=3, replication_factor=1,
                     extra_args={"master": ["--trace", path,
                                            "--split-eps", "300",
                                            "--split-sustain-ms", "1000"]}):
        c.table_service_client().create_table("simmed")
        rl = subprocess.Popen(
            [os.path.join(c.build_dir, "tools", "rt-load"), "--endpoint",
             c.table_endpoint, "--table", "simmed", "--mix", "insert",
             "--partitions", "0", "--pk-scheme", "hash", "--workers", "8",
             "--duration", "40s", "--quiet"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env=c.env)

        def events():
            req = urllib.request.Request(
                "http://%s/api/events" % c.master_http_addr,
                headers=c.admin_headers())
            with _OPENER.open(req, timeout=10) as r:
                return json.loads(r.read())

        try:
            wait_for(lambda: [e for e in events() if e["kind"] == "split"
                              and e.get("origin") == "policy"
                              and e.get("outcome") == "ok"], 35,
                     "a policy split")
            # Some more load after it: the halves report, one may move.
            time.sleep(6)
        finally:
            rl.kill()
            rl.communicate()
        wait_for(lambda: not c.master_status().get("ops"), 20,
                 "no operations")
        m = c.masters[0]
        m.signal(signal.SIGTERM)
        m.reap()
        yield path


def test_validate_reproduces_the_recorded_splits(trace):
    r = rt_sim("validate", trace, check=False)
    print(r.stdout)
    lines = r.stdout.splitlines()
    assert any(l.startswith("recorded policy decisions") for l in lines)
    summary = [l for l in lines if l.startswith("matched ")]
    assert summary, r.stdout
    # Every recorded split is simulated at the same key within one
    # decision interval. A move's start depends on when the real
    # cluster finished the operations before it (slower under the
    # sanitizers than the calibrated cost model), so a move may come a
    # tick late or go to another range there: printed, not asserted.
    recorded = [l for l in lines if l.split(" ")[0] in
                ("match", "late", "missing")]
    splits = [l for l in recorded if " split " in l]
    assert splits, r.stdout
    assert all(l.startswith("match ") for l in splits), r.stdout
    if all(l.startswith("match ") for l in recorded):
        assert r.returncode == 0, r.stdout


def test_replay_is_deterministic(trace, tmp_path):
    outs = []
    for k in range(2):
        d = tmp_path / ("r%d" % k)
        rt_sim("run", "--trace", trace, "--policy", "default", "--seed", 5,
               "--out", d)
        outs.append((d / "decisions.jsonl").read_bytes())
    assert outs[0] == outs[1]
    assert b'"kind":"split"' in outs[0]
    # Another policy on the same trace decides otherwise (none: nothing),
    # and the recorded demand, redistributed over its unsplit map by the
    # key samples, is the same within a few percent.
    d = tmp_path / "none"
    rt_sim("run", "--trace", trace, "--policy", "none", "--out", d)
    assert (d / "decisions.jsonl").read_bytes() == b""

    def total(p):
        return sum(float(x["demanded"]) for x in csv.DictReader(open(p)))
    a = total(tmp_path / "r0" / "metrics.csv")
    b = total(d / "metrics.csv")
    assert a > 0 and abs(a - b) <= 0.05 * a, (a, b)


def test_synthetic_is_deterministic(tmp_path):
    outs = []
    for k in range(2):
        d = tmp_path / ("s%d" % k)
        rt_sim("run", "--policy", "default", "--workload", "hotset",
               "--servers", 6, "--ranges", 24, "--duration", 300,
               "--seed", 9, "--out", d)
        outs.append((d / "decisions.jsonl").read_bytes())
    assert outs[0] == outs[1]
    assert outs[0].count(b"\n") > 5


def test_compare_smoke(tmp_path):
    for w in ("uniform", "flash"):
        d = tmp_path / w
        r = rt_sim("compare", "--policies", "default,none", "--workload", w,
                   "--servers", 5, "--ranges", 20, "--duration", 120,
                   "--out", d)
        assert "busiest/mean p99" in r.stdout and "503 rate %" in r.stdout
        rows = list(csv.DictReader(open(d / "compare.csv")))
        assert [x["policy"] for x in rows] == ["default", "none"]
        assert float(rows[0]["demanded"]) > 0
        for p in ("default", "none"):
            m = list(csv.DictReader(open(d / p / "metrics.csv")))
            assert len(m) == 120
            assert all(abs(float(x["served"]) + float(x["refused"]) -
                           float(x["demanded"])) < 1.0 for x in m)
            kv = json.load(open(d / p / "keyviz.json"))
            assert kv["source"] == "rt-sim" and kv["policy"] == p
            h = kv["history"]
            assert h["step_ms"] >= 1000 and h["frames"]
            f = h["frames"][0]
            assert {"t", "r", "s"} <= set(f)
            for rid, _demand, _server in f["r"]:
                assert str(rid) in h["ranges"]
            assert isinstance(kv["events"], list)
        # The side-by-side plot (gnuplot is a test package; without it
        # rt-sim leaves compare.gp and says so).
        assert (d / "compare.gp").exists()
        if shutil.which("gnuplot"):
            svg = (d / "compare.svg").read_text()
            assert "<svg" in svg and "demanded" in svg
        if w == "flash":
            assert int(rows[0]["steps"]) >= 1
