"""Load trace recording end to end (docs/TRACE.md): real processes
(rtcluster.py), rt-load as the client, `rtctl trace dump` as the reader.

1. A master started with --trace and a low --split-eps records while
   rt-load drives one table until the policy splits it; the master is
   stopped and the trace read back: its header names the policy and its
   thresholds, its last map snapshot matches /api/status, heartbeats
   carry the table's ranges with sampled keys, the policy's split
   decision has the key of the split event of /api/events and a "done"
   outcome, policy calls are numbered in order at non-decreasing times,
   and the file ends cleanly.
2. `rtctl trace start NAME | status | stop`: the file is
   DATA/traces/NAME.rttrace and reads back; a name that is a path is
   refused (400); without the admin token start and stop are 401
   (GET /api/trace is a status document: open with --status-open, as the
   harness runs the master, like /api/status).
3. Three masters, each with its own --trace: one file per leadership term
   (the deposed leader's ends "re-exec", the new leader's starts fresh).
"""

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from rtcluster import Cluster, started

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@pytest.fixture
def traced(tmp_path_factory):
    """3 servers at replication factor 1, the default policy with a low
    split threshold, recording from start."""
    path = str(tmp_path_factory.mktemp("trace-out") / "run.rttrace")
    for c in started(tmp_path_factory, "trace", n_ps=3,
                     replication_factor=1,
                     extra_args={"master": ["--trace", path,
                                            "--split-eps", "300",
                                            "--split-sustain-ms", "1000"]}):
        c.trace_path = path
        yield c


def http(cluster, method, path, token=True):
    req = urllib.request.Request(
        "http://%s%s" % (cluster.master_http_addr, path), method=method,
        data=b"" if method == "POST" else None,
        headers=cluster.admin_headers() if token else {})
    try:
        with _OPENER.open(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        body = e.read()
        try:
            return e.code, json.loads(body)
        except ValueError:
            return e.code, body


def dump(cluster, path, check=True):
    """The records of the trace at @path (rtctl trace dump), or None with
    check=False for a file that cannot be read yet (nothing flushed)."""
    r = cluster.rtctl("trace", "dump", path, check=check)
    if r.returncode != 0:
        return None
    return [json.loads(line) for line in r.stdout.splitlines()]


def ends_with(cluster, path, kind):
    recs = dump(cluster, path, check=False)
    return recs if recs and len(recs) > 1 and recs[-2]["kind"] == kind \
        else None


def rt_load_bin(cluster):
    return os.path.join(cluster.build_dir, "tools", "rt-load")


def wait_for(pred, timeout, what):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError("timed out waiting for " + what)


def test_trace_records_a_split(traced):
    c = traced
    c.table_service_client().create_table("traced")
    rl = subprocess.Popen(
        [rt_load_bin(c), "--endpoint", c.table_endpoint, "--table", "traced",
         "--mix", "insert", "--partitions", "0", "--pk-scheme", "hash",
         "--workers", "8", "--duration", "40s", "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=c.env)
    try:
        def split_done():
            _, evs = http(c, "GET", "/api/events")
            return [e for e in evs if e["kind"] == "split"
                    and e.get("origin") == "policy"
                    and e.get("outcome") == "ok"]
        splits = wait_for(split_done, 35, "a policy split")
    finally:
        rl.kill()
        rl.communicate()
    # Quiet: no operation in flight, the map settled.
    wait_for(lambda: not c.master_status().get("ops"), 20, "no operations")
    time.sleep(1.5)
    st = c.master_status()
    _, status = http(c, "GET", "/api/trace")
    assert status["recording"] is True, status
    assert status["file"] == c.trace_path, status
    metrics = _OPENER.open(urllib.request.Request(
        "http://%s/metrics" % c.master_http_addr,
        headers=c.admin_headers()), timeout=10).read().decode()
    assert "rt_master_trace_records_total" in metrics
    assert "rt_master_trace_bytes_total" in metrics

    m = c.masters[0]
    m.signal(signal.SIGTERM)
    m.reap()
    recs = dump(c, c.trace_path)
    kinds = [r["kind"] for r in recs]

    # The header: the policy and its thresholds.
    assert recs[0]["kind"] == "header", recs[0]
    h = recs[0]["header"]
    assert h["policy"] == "default"
    assert h["policy_config"]["split_eps"] == 300
    assert h["policy_config"]["split_sustain_ms"] == 1000
    assert h["reason"] == "start" and h["segment"] == 0

    # The last map snapshot is the map /api/status shows.
    maps = [r["map"] for r in recs if r["kind"] == "map"]
    assert maps, kinds[:20]
    last = maps[-1]
    got = sorted((r["id"], r["low"], None if r["high_inf"] else r["high"],
                  r["server_id"]) for r in last["ranges"] if r["table"] == "traced")
    want = sorted((r["id"], r["low"], r["high"], r["server"])
                  for r in st["ranges"] if r["table"] == "traced")
    assert got == want, (got, want)
    assert {s["id"] for s in last["servers"]} == \
        {s["id"] for s in st["servers"]}

    # Heartbeats carry the table's ranges' loads, with sampled keys.
    tr_ids = {r["id"] for m_ in maps for r in m_["ranges"]
              if r["table"] == "traced"}
    loads = [l for r in recs if r["kind"] == "heartbeat"
             for l in r["heartbeat"]["loads"] if l["range_id"] in tr_ids]
    assert loads
    assert any(l["entities"] > 0 and l["samples"] and
               all(isinstance(k, str) for k in l["samples"]) for l in loads)
    assert all(l["interval_ms"] > 0 for l in loads if l["entities"])

    # The policy's split decision, its key the split event's, and "done".
    decisions = [r["decision"] for r in recs if r["kind"] == "decision"
                 and r["decision"]["kind"] == "split"]
    assert decisions, kinds
    ev_keys = {e["key"] for e in splits}
    assert any(d["key"] in ev_keys and d["started"] for d in decisions), \
        (decisions, splits)
    d = [d for d in decisions if d["key"] in ev_keys][0]
    outs = [r["outcome"] for r in recs if r["kind"] == "outcome"
            and r["outcome"]["decision_id"] == d["id"]]
    assert outs and outs[0]["outcome"] == "done", outs
    assert len(outs[0]["new_ranges"]) == 2
    assert any(r["kind"] == "event" and r["event"]["kind"] == "split"
               for r in recs)

    # Policy calls numbered in order, at non-decreasing times.
    ticks = [(r["tick"]["n"], r["t_ms"]) for r in recs if r["kind"] == "tick"]
    assert len(ticks) >= 4, ticks  # twice a second, a few seconds
    assert [n for n, _ in ticks] == list(range(1, len(ticks) + 1))
    assert all(a[1] <= b[1] for a, b in zip(ticks, ticks[1:]))

    # A clean end.
    assert recs[-2]["kind"] == "end", recs[-3:]
    assert recs[-1] == {"kind": "eof", "truncated": False,
                        "records": len(recs) - 1}
    size = os.path.getsize(c.trace_path)
    span_s = max(r.get("t_ms", 0) for r in recs) / 1000.0
    print("\n[trace] %d records, %d bytes over %.1f s (%.0f bytes/s)"
          % (len(recs) - 1, size, span_s, size / max(span_s, 0.001)))
    # A restart with the same --trace keeps the older file as FILE.1.
    # (start_process returns before the master opened its trace.)
    c.start_process(m.name)
    wait_for(lambda: os.path.exists(c.trace_path + ".1"), 10,
             "the older file kept")
    assert os.path.getsize(c.trace_path + ".1") == size
    wait_for(lambda: os.path.exists(c.trace_path), 10, "a new trace file")


def test_rtctl_trace_start_stop(tmp_path_factory):
    for c in started(tmp_path_factory, "trace-ctl", n_ps=1,
                     replication_factor=1):
        # No token: 401 for both actions (and nothing starts).
        for path in ("/api/trace/start?name=x", "/api/trace/stop"):
            code, _ = http(c, "POST", path, token=False)
            assert code == 401, (path, code)

        # rtctl without a token: 401, the hint, exit 1.
        env = dict(c.env)
        env.pop("RT_ADMIN_TOKEN_FILE", None)
        env.pop("RT_ADMIN_TOKEN", None)
        for sub in (["start", "x"], ["stop"]):
            r = subprocess.run([c.bins["rtctl"], "--master-http",
                                c.master_http_addrs, "trace"] + sub,
                               capture_output=True, text=True, env=env,
                               cwd=str(c.workdir), timeout=30)
            assert r.returncode == 1, (sub, r.stdout, r.stderr)
            assert "admin token" in r.stderr, r.stderr

        # A name that is a path is refused; nothing is recorded.
        code, body = http(c, "POST", "/api/trace/start?name=../../etc/x")
        assert code == 400, body
        code, body = http(c, "POST", "/api/trace/stop")
        assert code == 404, body

        r = c.rtctl("trace", "start", "bench1")
        assert "recording" in r.stdout, r.stdout
        c.table_service_client().create_table("tracectl")
        # A second start while recording is a conflict.
        code, body = http(c, "POST", "/api/trace/start?name=other")
        assert code == 409, body
        time.sleep(2.5)
        r = c.rtctl("trace", "status", "--json")
        st = json.loads(r.stdout)
        assert st["recording"] is True
        path = st["file"]
        assert path.endswith("/traces/bench1.rttrace"), path
        assert path.startswith(str(c.workdir)), path
        assert st["records"] > 0 and st["bytes"] > 0, st
        r = c.rtctl("trace", "stop")
        assert "stopped" in r.stdout, r.stdout
        recs = dump(c, path)
        assert recs[0]["kind"] == "header"
        assert recs[0]["header"]["reason"] == "rtctl"
        assert any(r["kind"] == "map" and any(
            x["table"] == "tracectl" for x in r["map"]["ranges"]) for r in recs)
        assert recs[-2]["kind"] == "end" and \
            recs[-2]["end"]["reason"] == "stop"
        # The same name again: the file exists.
        code, body = http(c, "POST", "/api/trace/start?name=bench1")
        assert code == 409, body


def test_each_leadership_term_in_its_file(tmp_path_factory):
    """Three masters, each with its own --trace: only the leader makes a
    file; after `rtctl master transfer` the old leader's file ends with
    "re-exec" (a deposed leader re-executes itself) and the new leader's
    file starts with its header and a map holding the table."""
    work = tmp_path_factory.mktemp("trace-ha")
    c = Cluster(work, n_ps=1, replication_factor=1, masters=3)

    def path(m):
        return os.path.join(str(work), m.name + ".rttrace")

    for m in c.masters:
        c.master_args[m.name] = ["--trace", path(m)]
    c.start()
    try:
        old, _ = c.wait_master_leader()
        c.table_service_client().create_table("traceha")
        wait_for(lambda: os.path.exists(path(old)), 10, "the leader's trace")
        for m in c.masters:
            if m is not old:
                assert not os.path.exists(path(m)), m.name
        r = c.rtctl("master", "transfer")
        assert r.returncode == 0, r.stderr
        new = wait_for(lambda: (lambda p: p if p not in (None, old) else None)(
            c.master_leader()), 20, "a new leader")
        recs = wait_for(lambda: ends_with(c, path(old), "end"), 15,
                        "the old leader's trace end")
        assert recs[0]["header"]["reason"] == "start"
        assert recs[-2]["end"]["reason"] == "re-exec", recs[-3:]
        assert recs[-1]["truncated"] is False
        wait_for(lambda: os.path.exists(path(new)), 15, "the new trace")

        def new_map():
            rs = dump(c, path(new), check=False) or []
            maps = [r["map"] for r in rs if r["kind"] == "map"]
            return rs if maps and any(x["table"] == "traceha"
                                      for x in maps[0]["ranges"]) else None
        recs = wait_for(new_map, 10, "the new leader's map")
        assert recs[0]["kind"] == "header"
        assert recs[0]["header"]["segment"] == 0
        assert recs[0]["header"]["master_id"] == new.member_id
    finally:
        c.stop(check=False)
    c.check_exits()
    c.check_sanitizers()
