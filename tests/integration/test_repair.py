"""Corruption repair of replicated ranges end to end (partition-server
ps_repair.h, docs/DESIGN-replication.md §5.6): three partition servers,
the master at --replication-factor 3, the official SDK through the front
end.

Bit rot is simulated on a running server: every copy of a unique marker
string in its data.mdb gets one byte flipped (LMDB reads the file through
a shared mapping, so the server sees the flip at once; stale copies in
free pages are flipped too, harmlessly). rt-inspect --live then reports
the range's digest as corrupt on that server, which proves the damage
landed. Checked:
  - a point read at the primary is answered with the right value (from a
    secondary's copy) and the primary's copy is repaired: its digest
    equals the secondaries' again;
  - a query over the damaged value is answered 503 while the value is
    repaired in the background; the SDK's retry gets the right entities;
  - the scrub finds damage on a secondary nobody reads and repairs it;
  - an RF-1 table (no other copy) answers 500 and keeps its damage.
About 15 s.
"""

import json
import os
import sys
import time
import uuid

import pytest
from azure.core.exceptions import HttpResponseError

from rtcluster import Cluster

TABLE = "repairt"


@pytest.fixture
def make_cluster(tmp_path_factory):
    made = []

    def make(scrub_mb, rf=3):
        c = Cluster(tmp_path_factory.mktemp("cluster"), n_ps=3,
                    replication_factor=rf,
                    extra_args={"ps": ["--scrub-mb-per-s", str(scrub_mb)]})
        sys.stderr.write("\n[rtcluster] logs in %s\n" % c.logdir)
        made.append(c)
        c.start()
        return c

    yield make
    for c in made:
        c.stop(check=False)
        c.check_exits()
        c.check_sanitizers()


def server_names(cluster):
    st = cluster.master_status()
    by_addr = {cluster.ps_addr(p): p.name for p in cluster.pss}
    return {s["id"]: by_addr[s["addr"]] for s in st["servers"]
            if s["addr"] in by_addr}


def the_range(cluster):
    rs = [r for r in cluster.master_status()["ranges"]
          if r["table"] == TABLE]
    assert len(rs) == 1, rs
    return rs[0]


def flip_marker(cluster, name, marker):
    """Flips one byte of every copy of @marker in @name's data.mdb.
    Returns how many copies were hit."""
    path = os.path.join(cluster.workdir, name, "data.mdb")
    needle = marker.encode()
    with open(path, "r+b") as f:
        data = f.read()
        hits, at = 0, data.find(needle)
        while at >= 0:
            f.seek(at + len(needle) // 2)
            f.write(bytes([data[at + len(needle) // 2] ^ 0x20]))
            hits += 1
            at = data.find(needle, at + 1)
        f.flush()
        os.fsync(f.fileno())
    return hits


def digest(cluster, name, rid):
    """(exit status, digest) of range @rid on running server @name; the
    digest is "corrupt" when a value of the range fails its checksum."""
    r = cluster.inspect(name, "--live", check=False)
    assert r.returncode in (0, 4), r.stderr
    doc = json.loads(r.stdout)
    got = [g["digest"] for g in doc["ranges"] if g["id"] == rid]
    assert got, doc
    return r.returncode, got[0] if got[0] is not None else "corrupt"


def setup_table(cluster):
    svc = cluster.table_service_client()
    svc.create_table(TABLE)
    tc = svc.get_table_client(TABLE)
    marker = "M" + uuid.uuid4().hex * 2
    for i in range(20):
        tc.create_entity({"PartitionKey": "p", "RowKey": "r%02d" % i,
                          "Data": "filler-%d" % i})
    tc.create_entity({"PartitionKey": "p", "RowKey": "victim",
                      "Data": marker})
    return svc, tc, marker


def wait_digests_equal(cluster, names, rid, timeout):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = {n: digest(cluster, n, rid) for n in names}
        if all(rc == 0 for rc, _ in last.values()) and \
                len({d for _, d in last.values()}) == 1:
            return last
        time.sleep(0.3)
    pytest.fail("replicas still differ after %ds: %r" % (timeout, last))


def test_read_repairs_the_primary(make_cluster):
    cluster = make_cluster(scrub_mb=0)
    _, tc, marker = setup_table(cluster)
    rg = the_range(cluster)
    names = server_names(cluster)
    prim = names[rg["primary"]]
    all_names = [names[s] for s in rg["replicas"]]
    assert len(all_names) == 3, rg
    assert flip_marker(cluster, prim, marker) >= 1
    rc, d = digest(cluster, prim, rg["id"])
    assert rc == 4 and d == "corrupt", (rc, d)

    ent = tc.get_entity("p", "victim")
    assert ent["Data"] == marker
    # The primary's copy is whole again, equal to the secondaries'.
    wait_digests_equal(cluster, all_names, rg["id"], timeout=10)
    assert tc.get_entity("p", "victim")["Data"] == marker


def test_query_over_damage_retries_and_repairs(make_cluster):
    cluster = make_cluster(scrub_mb=0)
    _, tc, marker = setup_table(cluster)
    rg = the_range(cluster)
    names = server_names(cluster)
    prim = names[rg["primary"]]
    assert flip_marker(cluster, prim, marker) >= 1
    # The SDK retries the 503 of the first page; the retry reads the
    # repaired value.
    got = {e["RowKey"]: e["Data"] for e in tc.query_entities(
        "PartitionKey eq 'p'")}
    assert len(got) == 21 and got["victim"] == marker, got
    wait_digests_equal(cluster, [names[s] for s in rg["replicas"]],
                       rg["id"], timeout=10)


def test_scrub_repairs_a_secondary(make_cluster):
    cluster = make_cluster(scrub_mb=64)
    _, tc, marker = setup_table(cluster)
    rg = the_range(cluster)
    names = server_names(cluster)
    sec = [names[s] for s in rg["replicas"] if s != rg["primary"]][0]
    assert flip_marker(cluster, sec, marker) >= 1
    # Nobody reads the secondary: only the scrub can find it.
    wait_digests_equal(cluster, [names[s] for s in rg["replicas"]],
                       rg["id"], timeout=15)
    assert tc.get_entity("p", "victim")["Data"] == marker


def test_rf1_damage_is_reported_not_invented(make_cluster):
    cluster = make_cluster(scrub_mb=0, rf=1)
    _, tc, marker = setup_table(cluster)
    rg = the_range(cluster)
    owner = server_names(cluster)[rg["server"]]
    assert flip_marker(cluster, owner, marker) >= 1
    with pytest.raises(HttpResponseError) as ei:
        tc.get_entity("p", "victim")
    assert ei.value.status_code == 500
    # The neighbours still read.
    assert tc.get_entity("p", "r03")["Data"] == "filler-3"
