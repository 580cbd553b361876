"""The "crdb" policy (master/ms_policy_crdb.c) on a real cluster: three
capped partition servers, one master run with --policy crdb, rt-load
saturating one table's only range, at replication factor 1 and 3.

CockroachDB's rules, seen from outside: the hot range is split by load at
the weighted finder's key (again, while its parts stay above the
threshold), the store rebalancer then moves parts off the overfull server
(at replication factor 1 there is no in-sync replica to hand the primary
role to, so it sheds by moves), the servers end up serving alike, and
every decision's event carries the rule that made it. At RF 3 every
server holds every part, so it sheds by transfers of the primary role
(lease transfers) alone. Also: a bad --policy-opt is refused at start
(exit 2).
"""

import csv
import os
import subprocess
import sys
import time

import pytest

from rtcluster import started
from test_balance import events, saturating_inserts, table_ranges

# The rebalancer runs every 2 s here (its default is 5 s) so that the
# test's 30 s of load see several runs. The servers are capped low (500
# entities/s) so that one client saturates them even on a busy machine,
# and the load split threshold is half a server's cap: CockroachDB's
# (2500 QPS) is far below what one store serves, and above a server's
# capacity parts that cannot move are not split either (master/README.md,
# "The crdb policy").
CRDB_ARGS = ["--policy", "crdb", "--policy-opt", "interval_ms=2000",
             "--split-eps", "250"]


@pytest.fixture
def capped_crdb(tmp_path_factory):
    """3 servers capped at 500 entities/s each, --policy crdb
    (--split-eps 250), RF 1."""
    yield from started(tmp_path_factory, "crdb", n_ps=3,
                       replication_factor=1,
                       extra_args={"master": CRDB_ARGS,
                                   "ps": ["--max-server-eps", "500"]})


def served(c):
    """Entities/s each server serves (the master's smoothed figures)."""
    return {s["id"]: s["load"]["ent_s"]
            for s in c.master_status()["servers"]}


def test_crdb_splits_and_evens_out(capped_crdb):
    """A saturating client on one range: split by load within 15 s, parts
    moved by the store rebalancer onto all three servers within 20 s
    (measured: 3.5 s and 8 s), the busiest server within 1.75 times the
    mean at the end (it starts at 3)."""
    c = capped_crdb
    c.table_service_client().create_table("hot")
    csv_path = os.path.join(c.workdir, "hot.csv")
    duration = 30
    t0 = time.monotonic()
    rl = saturating_inserts(c, "hot", duration, csv_path)
    split_at = spread_at = None
    samples = []  # (t, {server: ent_s}) over the last 8 s of load
    try:
        while rl.poll() is None and time.monotonic() - t0 < duration + 30:
            rs = table_ranges(c, "hot")
            now = time.monotonic() - t0
            if split_at is None and len(rs) >= 2:
                split_at = now
            if spread_at is None and len({r["server"] for r in rs}) >= 3:
                spread_at = now
            if now >= duration - 8:
                samples.append((now, served(c)))
            time.sleep(0.5)
        out = rl.communicate(timeout=60)[0]
    finally:
        if rl.poll() is None:
            rl.kill()
            rl.wait()
    rs = table_ranges(c, "hot")
    evs = [e for e in events(c) if e.get("origin") == "policy"]
    sys.stderr.write("\n[crdb] split after %s s, on 3 servers after %s s; "
                     "%d ranges on %d servers at the end\n"
                     % (split_at, spread_at, len(rs),
                        len({r["server"] for r in rs})))
    for e in evs:
        sys.stderr.write("  %s %s range %s %s: %s\n" % (
            e["time"], e["kind"], e.get("range"), e.get("outcome", ""),
            e.get("reason", "")))

    splits = [e for e in evs if e["kind"] == "split"]
    moves = [e for e in evs if e["kind"] == "move"]
    assert any(e["kind"] == "hot" and "split finder starts recording"
               in e.get("reason", "") for e in evs), evs
    assert splits, evs
    assert moves, evs
    # Every decision says which of CockroachDB's rules made it.
    for e in splits:
        assert "load-based split" in e["reason"], e
        assert "weighted finder" in e["reason"], e
    for e in moves:
        assert "store rebalancer (replica rebalance)" in e["reason"], e
    assert all(e.get("outcome") == "ok" for e in splits + moves), evs
    # No merge of the hot parts, no transfer at RF 1.
    assert not [e for e in evs if e["kind"] in ("merge", "transfer")], evs
    assert split_at is not None and split_at <= 15, split_at
    assert spread_at is not None and spread_at <= 20, spread_at
    assert len({r["server"] for r in rs}) == 3, rs

    # Even: over the last seconds of load every server serves, and the
    # busiest serves at most 1.75 times the mean. How even depends on how
    # many parts the load split into: twenty (a quiet Debug run: every
    # server at its cap, measured 1.00 to 1.01), but four (the sanitizer
    # build on a busy machine, whose parts stay under the split
    # threshold) sit 2:1:1 at best, 1.5 times the mean, and the rule then
    # refuses the next move (the source would drop below the underfull
    # level: shouldNotMoveAway); measured 1.34 to 1.46.
    assert samples, "no sample in the last seconds of load"
    ratios = []
    for t, sv in samples:
        vals = list(sv.values())
        mean = sum(vals) / len(vals)
        if mean > 0:
            ratios.append((t, max(vals) / mean, sv))
    sys.stderr.write("[crdb] busiest/mean over the last seconds: %s\n"
                     % ", ".join("%.2f" % r for _, r, _ in ratios))
    assert len(ratios) >= 3, samples
    assert all(r <= 1.75 and min(sv.values()) > 0
               for _, r, sv in ratios[-3:]), ratios

    # Throughput (successful inserts/s) before the first split and at the
    # end, printed, not asserted: on this shared 2-core machine the
    # client is often what limits it (measured: 1.8 to 2.8 times in a
    # quiet Debug run, 1.1 with the load average at 25).
    with open(csv_path) as f:
        rows = [r for r in csv.DictReader(f) if r["phase"] == "run"]
    ok = [float(r["entities_per_s"]) for r in rows]
    sys.stderr.write("[crdb] throughput: %.0f/s at the start, %.0f/s in "
                     "the last 5 s (cap 500/s per server)\n%s\n"
                     % (sum(ok[1:3]) / 2, sum(ok[-5:]) / 5, out[-600:]))
    assert sum(ok[-5:]) > 0, rows


def test_bad_policy_opt_refused(tmp_path):
    """An unknown --policy-opt key, or a bad value, is a bad flag: rt-master
    exits 2 at once and names it."""
    build = os.environ.get("RT_BUILD_DIR")
    if not build:
        pytest.skip("RT_BUILD_DIR not set")
    master = os.path.join(build, "master", "rt-master")
    for opt, word in (("bogus=1", "bogus"), ("min_diff=x", "min_diff"),
                      ("interval_ms=0", "interval_ms")):
        r = subprocess.run(
            [master, "--insecure-rpc", "--data", str(tmp_path / "m"),
             "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0",
             "--raft-listen", "127.0.0.1:0", "--policy", "crdb",
             "--policy-opt", opt],
            capture_output=True, text=True, timeout=30)
        assert r.returncode == 2, (opt, r.returncode, r.stderr)
        assert word in r.stderr, r.stderr
    r = subprocess.run(
        [master, "--insecure-rpc", "--data", str(tmp_path / "m"),
         "--policy", "default", "--policy-opt", "interval_ms=10",
         "--check-config"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "takes no options" in r.stderr, r.stderr
    r = subprocess.run(
        [master, "--insecure-rpc", "--data", str(tmp_path / "m"),
         "--policy", "crdb", "--policy-opt",
         "interval_ms=1000,threshold_pct=20", "--check-config"],
        capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr


@pytest.fixture
def capped_crdb_rf3(tmp_path_factory):
    """The same with every range on all three servers (RF 3): no server
    can take a copy, so the store rebalancer sheds by transfers alone."""
    yield from started(tmp_path_factory, "crdb3", n_ps=3,
                       replication_factor=3,
                       extra_args={"master": CRDB_ARGS,
                                   "ps": ["--max-server-eps", "500"]})


def test_crdb_rf3_sheds_by_lease_transfer(capped_crdb_rf3):
    """At RF 3 the split parts keep the replica set and the rebalancer
    moves load by handing primary roles to in-sync replicas (CockroachDB's
    lease transfers): every server is primary of a part within 20 s
    (measured: 8 s), no copy moves, no server is primary of more than
    half the parts, and the busiest serves at most twice the mean."""
    c = capped_crdb_rf3
    c.table_service_client().create_table("hot3")
    rs = table_ranges(c, "hot3")
    if len(rs[0]["replicas"]) < 3:
        pytest.skip("the cluster placed the table unreplicated")
    replicas = sorted(rs[0]["replicas"])
    duration = 30
    t0 = time.monotonic()
    rl = saturating_inserts(c, "hot3", duration)
    spread_at = None
    samples = []
    try:
        while rl.poll() is None and time.monotonic() - t0 < duration + 30:
            rs = table_ranges(c, "hot3")
            now = time.monotonic() - t0
            if spread_at is None and len({r["server"] for r in rs}) >= 3:
                spread_at = now
            if now >= duration - 8:
                samples.append(served(c))
            time.sleep(0.5)
        out = rl.communicate(timeout=60)[0]
    finally:
        if rl.poll() is None:
            rl.kill()
            rl.wait()
    rs = table_ranges(c, "hot3")
    evs = [e for e in events(c) if e.get("origin") == "policy"]
    sys.stderr.write("\n[crdb rf3] primaries on 3 servers after %s s; %d "
                     "ranges\n" % (spread_at, len(rs)))
    for e in evs:
        if e["kind"] in ("split", "transfer", "move", "merge"):
            sys.stderr.write("  %s %s range %s %s: %s\n" % (
                e["time"], e["kind"], e.get("range"), e.get("outcome", ""),
                e.get("reason", "")))
    transfers = [e for e in evs if e["kind"] == "transfer"]
    assert [e for e in evs if e["kind"] == "split"], evs
    assert transfers, evs
    for e in transfers:
        assert "store rebalancer (lease transfer)" in e["reason"], e
    assert all(e.get("outcome") == "ok" for e in transfers), transfers
    assert not [e for e in evs if e["kind"] == "move"], evs
    for r in rs:
        assert sorted(r["replicas"]) == replicas, r
    assert spread_at is not None and spread_at <= 20, spread_at
    assert len({r["server"] for r in rs}) == 3, rs
    ratios = []
    for sv in samples:
        vals = list(sv.values())
        mean = sum(vals) / len(vals)
        if mean > 0:
            ratios.append(max(vals) / mean)
    sys.stderr.write("[crdb rf3] busiest/mean: %s\n%s\n"
                     % (", ".join("%.2f" % r for r in ratios), out[-400:]))
    # No server is primary of more than half the parts, and the busiest
    # serves at most twice the mean (from 3 times). The rule stops short
    # of even: with parts of 450/s placed 4:2:2 (1800, 900, 900/s: mean
    # 1200, band 1080..1320) a transfer would leave the target at 1350,
    # over the band (shouldNotMoveTo), and with four parts 2:1:1 the source would
    # drop below it (shouldNotMoveAway). Measured: 1.02 to 1.16 (nine
    # parts, a quiet Debug run), 1.22 to 1.51 (four, sanitizer build),
    # 1.76 to 1.96 (eight parts 4:2:2; each server also applies the
    # others' writes as a secondary, so the two with fewer primaries
    # serve less than their demand).
    per = {}
    for r in rs:
        per[r["server"]] = per.get(r["server"], 0) + 1
    assert max(per.values()) * 2 <= len(rs), per
    assert len(ratios) >= 3 and all(r <= 2.0 for r in ratios[-3:]), ratios
