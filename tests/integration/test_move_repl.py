"""Moves and drains of replicated ranges end to end
(docs/DESIGN-replication.md §9.3): four partition servers, the master at
--replication-factor 3, two tables (one range each, three copies), the
official SDK through the front end.

  - under a write load, `rtctl move RANGE SERVER` of a range to the
    server that holds no copy of it adds a learner there, lets it join
    the ISR, transfers the primary role to it (the source is the
    primary), then removes the source: the range's replicas are the two
    others + the target, the source is gone (no copy on its disk), every
    acknowledged write reads back, and rt-inspect shows the three copies
    identical;
  - bad moves are refused with a clear 4xx and change nothing: the
    target already holds a copy (409), an unknown server (404);
  - `rtctl drain` of a server moves every replica it holds away (its
    primaries are transferred first): afterwards no range names it;
  - the master SIGKILLed in the middle of a move (the learner on the
    target added, the source not removed yet) and started again: nothing
    of the move is durable, so the restarted master settles the extra
    copy (the learner joins or leaves, then the re-replication plan trims
    a set larger than rf): every range ends with exactly rf replicas, all
    in the ISR, rf copies on disk, and every acknowledged write reads
    back.

About 90 s.
"""

import json
import signal
import sys
import threading
import time

import pytest

from rtcluster import started
from test_replication import (RF, TABLES, Load, check_reads,
                              check_replicas, our_ranges)


@pytest.fixture
def cluster(tmp_path_factory):
    yield from started(tmp_path_factory, "cluster", n_ps=4,
                       replication_factor=RF)


@pytest.fixture
def tables(cluster):
    svc = cluster.table_service_client()
    for t in TABLES:
        svc.create_table(t)
    if all(len(r["replicas"]) < 2 for r in our_ranges(cluster)):
        pytest.skip("the cluster reports no replicated range")
    return svc


def range_of(cluster, table):
    return [r for r in our_ranges(cluster) if r["table"] == table][0]


def server_ids(cluster):
    return sorted(s["id"] for s in cluster.master_status()["servers"])


def wait_for(pred, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.2)
    return pred()


def test_move_primary_replica_under_load(cluster, tables):
    """rtctl move of a range from its primary's server to the fourth."""
    with Load(cluster, 1) as load:
        time.sleep(1.5)
        rg = range_of(cluster, TABLES[0])
        src = rg["server"]
        target = [s for s in server_ids(cluster)
                  if s not in rg["replicas"]][0]
        r = cluster.rtctl("move", str(rg["id"]), str(target), "--json",
                          timeout=120, check=False)
        sys.stderr.write("move: %s\n" % r.stdout)
        ev = json.loads(r.stdout)
        assert r.returncode == 0, (r.stdout, r.stderr)
        assert ev["outcome"] == "ok" and ev["replicated"], ev
        assert ev["from"] == src and ev["to"] == target, ev
        assert "adding_ms" in ev["phases"] and \
            "transfer_ms" in ev["phases"], ev
        t = time.monotonic()
        rg2 = range_of(cluster, TABLES[0])
        want = sorted([s for s in rg["replicas"] if s != src] + [target])
        assert sorted(rg2["replicas"]) == want, rg2
        assert sorted(rg2["insync"]) == want, rg2
        assert rg2["server"] == target, rg2
        assert load.wait_acked_after(t), "no write acknowledged after"
        time.sleep(0.5)
    load.finish()
    sys.stderr.write("move of range %d from %d to %d: window %s ms, "
                     "phases %r; writes %r\n"
                     % (rg["id"], src, target, ev.get("window_ms"),
                        ev["phases"], load.summary()))
    errors = {o[3] for o in load.ops() if o[3] != 200}
    assert errors <= {503, 500}, errors
    check_reads(cluster, load)
    check_replicas(cluster)
    check_reads(cluster, load)


def test_move_refused(cluster, tables):
    """Bad moves: 4xx with a reason, nothing changes."""
    rg = range_of(cluster, TABLES[0])
    member = [s for s in rg["replicas"] if s != rg["server"]][0]
    cases = [(str(rg["id"]), str(member), "HTTP 409",
              "already holds a replica"),
             (str(rg["id"]), "999", "HTTP 404", "no server")]
    for rid, to, code, why in cases:
        r = cluster.rtctl("move", rid, to, check=False)
        assert r.returncode == 1, (rid, to, r.stdout, r.stderr)
        assert code in r.stderr and why in r.stderr, r.stderr
    assert range_of(cluster, TABLES[0])["epoch"] == rg["epoch"]


def test_drain_moves_replicas(cluster, tables):
    """rtctl drain of a server holding copies: every copy moves away."""
    counts = {}
    for rg in our_ranges(cluster):
        for s in rg["replicas"]:
            counts[s] = counts.get(s, 0) + 1
    victim = max(counts, key=lambda s: counts[s])
    with Load(cluster, 2) as load:
        time.sleep(1.5)
        r = cluster.rtctl("drain", str(victim), timeout=120)
        assert "drained" in r.stdout, r.stdout
        t = time.monotonic()
        assert wait_for(lambda: all(victim not in rg["replicas"]
                                    for rg in our_ranges(cluster)), 30), \
            our_ranges(cluster)
        assert load.wait_acked_after(t), "no write acknowledged after"
    load.finish()
    for rg in our_ranges(cluster):
        assert len(rg["replicas"]) == RF, rg
        assert sorted(rg["insync"]) == sorted(rg["replicas"]), rg
    check_reads(cluster, load)
    check_replicas(cluster)


def test_master_killed_mid_move(cluster, tables):
    """SIGKILL of the master while a replicated move holds rf + 1 copies:
    the restarted master brings the range back to rf copies."""
    rg = range_of(cluster, TABLES[0])
    target = [s for s in server_ids(cluster) if s not in rg["replicas"]][0]
    with Load(cluster, 3) as load:
        time.sleep(1.5)
        res = {}

        def move():
            # The master dies under this request: no answer is expected.
            res["r"] = cluster.rtctl("move", str(rg["id"]), str(target),
                                     "--json", timeout=120, check=False)

        mv = threading.Thread(target=move, daemon=True)
        mv.start()
        # The learner is in the set (copying or joined), the source not
        # removed yet: the range has rf + 1 replicas.
        end = time.monotonic() + 30
        grown = False
        while not grown and time.monotonic() < end:
            grown = len(range_of(cluster, TABLES[0])["replicas"]) > RF
            time.sleep(0.02)
        cluster.kill("master", signal.SIGKILL)
        mv.join(timeout=30)
        assert grown, ("the move never added its learner",
                       res.get("r") and res["r"].stdout)
        t = time.monotonic()
        cluster.start_process("master")
        assert wait_for(cluster._all_servers_up, 30)

        def settled():
            rs = our_ranges(cluster)
            st = cluster.master_status()
            return (all(len(r["replicas"]) == RF and
                        sorted(r["insync"]) == sorted(r["replicas"])
                        for r in rs) and
                    not any(o.get("range") in {r["id"] for r in rs}
                            for o in st.get("ops", [])))
        ok = wait_for(settled, 60)
        sys.stderr.write("after the restart: %s\n"
                         % json.dumps(range_of(cluster, TABLES[0])))
        assert ok, our_ranges(cluster)
        assert load.wait_acked_after(t), "no write acknowledged after"
    load.finish()
    sys.stderr.write("master SIGKILLed mid-move of range %d to %d: "
                     "writes %r\n" % (rg["id"], target, load.summary()))
    check_reads(cluster, load)
    check_replicas(cluster)
    check_reads(cluster, load)
