"""A partition server whose store cannot take writes answers as Azure does
(frontend/README.md, "A full store"): every write, $batch included, gets
503 ServerBusy with x-ms-error-code ServerBusy and the documented text
("The server is currently unable to receive requests. Please retry your
request."), never 500 InternalError; reads go on; writes succeed again as
soon as there is room, and nothing acknowledged is lost.

Three clusters. The first two have one partition server at replication
factor 1 (the full server is the table's only copy):
  - the LMDB map: the server runs with --map-size-mb 1, so its map fills
    (MDB_MAP_FULL); room returns when it restarts with the default map;
  - the file system: the server's data directory is a 6 MB tmpfs that a
    ballast file fills (ENOSPC from the kernel); room returns when the
    ballast is deleted, with no restart, and the server never stops (a
    commit that failed on a full disk after its group was shipped used to
    abort it).
The third runs three servers at replication factor 3, each on its own
tmpfs, and fills the primary's: its writes are 503 ServerBusy, it stays
the primary and keeps running (before, it aborted at commit, a failover
followed and the client saw 500 OperationTimedOut, as in a fault run);
freeing its disk makes writes succeed again. Then it fills a
secondary's: the writes go on, the secondary leaves the in-sync set
(silent: it retries the group it cannot apply) and rejoins once freed.
Mounting needs root (or CAP_SYS_ADMIN): without it the tmpfs tests are
skipped with the reason.
"""
import json
import os
import subprocess
import sys
import time

import pytest
from azure.core.exceptions import HttpResponseError

from rtcluster import Cluster

BUSY_TEXT = ("The server is currently unable to receive requests. Please "
             "retry your request.")
VALUE = "x" * 30000  # a 60 KB entity (UTF-16) in ~30 KB of store
MAX_FILL = 400       # inserts before giving up on a full store


def _client(cluster, table):
    """A TableClient that does not retry: the test sees each 503."""
    svc = cluster.table_service_client(retry_total=0)
    return svc, svc.get_table_client(table)


def _fill(tc, start=0):
    """Inserts 30 KB entities (RowKey @start, @start + 1, ...) until one is
    refused. Returns (its RowKey number = how many rows are acknowledged,
    the refusal)."""
    for i in range(start, start + MAX_FILL):
        try:
            tc.create_entity({"PartitionKey": "f", "RowKey": "%05d" % i,
                              "s": VALUE})
        except HttpResponseError as e:
            return i, e
    raise AssertionError("%d inserts of 30 KB all succeeded: the store "
                         "never filled" % MAX_FILL)


def _assert_busy(err):
    """@err is Azure's 503 ServerBusy (header and body)."""
    assert err.status_code == 503, err
    assert err.response.headers.get("x-ms-error-code") == "ServerBusy", \
        err.response.headers
    text = err.response.text()
    assert BUSY_TEXT in text, text
    assert "InternalError" not in text, text


def _assert_writes_refused(tc):
    """Every kind of write, the batch included, is 503 ServerBusy."""
    big = {"PartitionKey": "f", "RowKey": "w", "s": VALUE}
    for write in (lambda: tc.create_entity(dict(big, RowKey="w1")),
                  lambda: tc.upsert_entity(dict(big, RowKey="w2")),
                  lambda: tc.update_entity(dict(big, RowKey="00000")),
                  lambda: tc.submit_transaction(
                      [("create", dict(big, RowKey="b%d" % i))
                       for i in range(3)])):
        with pytest.raises(HttpResponseError) as ei:
            write()
        _assert_busy(ei.value)


def _assert_reads(tc, n):
    """The @n acknowledged entities read back, point and query."""
    assert tc.get_entity("f", "00000")["s"] == VALUE
    assert tc.get_entity("f", "%05d" % (n - 1))["s"] == VALUE
    keys = [e["RowKey"] for e in tc.query_entities(
        "PartitionKey eq 'f'", select=["RowKey"])]
    assert keys == ["%05d" % i for i in range(n)]


# ------------------------------------------------------------ LMDB map
@pytest.fixture(scope="module")
def map_cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("cluster"), n_ps=1,
                replication_factor=1)
    c.ps_args["ps1"] = ["--map-size-mb", "1"]
    sys.stderr.write("\n[rtcluster] logs in %s\n" % c.logdir)
    c.start()
    yield c
    c.stop(check=False)
    c.check_sanitizers()


def test_map_full_is_server_busy_and_recovers(map_cluster):
    """A 1 MB LMDB map fills: writes 503 ServerBusy, reads work; after a
    restart with the default map the writes succeed and every acknowledged
    entity is there."""
    svc, tc = _client(map_cluster, "mapfull")
    svc.create_table("mapfull")
    n, err = _fill(tc)
    assert n > 0, "not one insert fit in the map"
    _assert_busy(err)
    _assert_writes_refused(tc)
    _assert_reads(tc, n)

    # Room again: the same data directory with the default map.
    map_cluster.ps_args.pop("ps1")
    map_cluster.start_process("ps1")
    svc, tc = _client(map_cluster, "mapfull")
    retrying = map_cluster.table_service_client().get_table_client("mapfull")
    retrying.create_entity({"PartitionKey": "f", "RowKey": "%05d" % n,
                            "s": VALUE})
    tc.submit_transaction([("create", {"PartitionKey": "f",
                                       "RowKey": "%05d" % (n + 1 + i),
                                       "s": VALUE})
                           for i in range(3)])
    _assert_reads(tc, n + 4)


# ------------------------------------------------------------ tmpfs
def _mount_tmpfs(path, size_mb):
    os.makedirs(path, exist_ok=True)
    try:
        r = subprocess.run(["mount", "-t", "tmpfs", "-o",
                            "size=%dm,mode=0700" % size_mb, "tmpfs", path],
                           capture_output=True, text=True, timeout=30)
    except OSError as e:
        return str(e)
    return None if r.returncode == 0 else (r.stderr.strip() or
                                           "mount exit %d" % r.returncode)


@pytest.fixture(scope="module")
def fs_cluster(tmp_path_factory):
    work = tmp_path_factory.mktemp("cluster")
    data = os.path.join(str(work), "ps1")
    why = _mount_tmpfs(data, 6)
    if why:
        pytest.skip("cannot mount a tmpfs for the server's data directory "
                    "(needs root or CAP_SYS_ADMIN): %s" % why)
    c = Cluster(work, n_ps=1, replication_factor=1)
    sys.stderr.write("\n[rtcluster] logs in %s\n" % c.logdir)
    try:
        c.start()
        yield c, data
        c.stop(check=False)
        c.check_sanitizers()
    finally:
        subprocess.run(["umount", "-l", data], capture_output=True,
                       timeout=30)


def test_fs_full_is_server_busy_until_space_returns(fs_cluster):
    """The file system under the store fills (ENOSPC): writes 503
    ServerBusy, reads work; deleting the ballast makes room and the next
    writes succeed with no restart."""
    cluster, data = fs_cluster
    svc, tc = _client(cluster, "fsfull")
    svc.create_table("fsfull")
    tc.create_entity({"PartitionKey": "f", "RowKey": "00000", "s": VALUE})
    # Leave ~1 MB for the store to grow into, then fill that with entities.
    st = os.statvfs(data)
    free = st.f_bavail * st.f_frsize
    ballast = os.path.join(data, "ballast")
    with open(ballast, "wb") as f:
        f.write(b"\0" * max(0, free - (1 << 20)))
        f.flush()
        os.fsync(f.fileno())
    n, err = _fill(tc, start=1)
    _assert_busy(err)
    _assert_writes_refused(tc)
    _assert_reads(tc, n)

    os.unlink(ballast)
    tc.create_entity({"PartitionKey": "f", "RowKey": "%05d" % n,
                      "s": VALUE})
    tc.submit_transaction([("create", {"PartitionKey": "f",
                                       "RowKey": "%05d" % (n + 1 + i),
                                       "s": VALUE})
                           for i in range(3)])
    _assert_reads(tc, n + 4)
    assert cluster.proc("ps1").running(), "the full server stopped"


# ------------------------------------------------------------ RF 3, tmpfs
@pytest.fixture(scope="module")
def rf3_cluster(tmp_path_factory):
    """Three servers at replication factor 3, each on its own 24 MB
    tmpfs."""
    work = tmp_path_factory.mktemp("cluster")
    datas = [os.path.join(str(work), "ps%d" % i) for i in (1, 2, 3)]
    mounted = []
    try:
        for d in datas:
            why = _mount_tmpfs(d, 24)
            if why:
                pytest.skip("cannot mount a tmpfs for the servers' data "
                            "directories (needs root or CAP_SYS_ADMIN): %s"
                            % why)
            mounted.append(d)
        c = Cluster(work, n_ps=3, replication_factor=3)
        sys.stderr.write("\n[rtcluster] logs in %s\n" % c.logdir)
        c.start()
        yield c
        c.stop(check=False)
        c.check_sanitizers()
    finally:
        for d in mounted:
            subprocess.run(["umount", "-l", d], capture_output=True,
                           timeout=30)


def _primary_name(cluster, table):
    st = cluster.master_status()
    by_addr = {cluster.ps_addr(p): p.name for p in cluster.pss}
    names = {s["id"]: by_addr.get(s["addr"]) for s in st["servers"]}
    prim = [r["server"] for r in st["ranges"] if r["table"] == table]
    assert len(prim) == 1, st
    return names[prim[0]]


def test_rf3_primary_fs_full(rf3_cluster):
    """At replication factor 3 the primary's file system fills: its writes
    are 503 ServerBusy (refused before the group is shipped, so no server
    stops and no failover starts), reads go on; freeing the disk makes
    writes succeed again, on the same primary."""
    cluster = rf3_cluster
    svc, tc = _client(cluster, "rf3full")
    svc.create_table("rf3full")
    tc.create_entity({"PartitionKey": "f", "RowKey": "00000", "s": VALUE})
    prim = _primary_name(cluster, "rf3full")
    data = os.path.join(cluster.workdir, prim)
    st = os.statvfs(data)
    ballast = os.path.join(data, "ballast")
    with open(ballast, "wb") as f:
        f.write(b"\0" * max(0, st.f_bavail * st.f_frsize - (1 << 20)))
        f.flush()
        os.fsync(f.fileno())
    n, err = _fill(tc, start=1)
    _assert_busy(err)
    _assert_writes_refused(tc)
    _assert_reads(tc, n)
    assert _primary_name(cluster, "rf3full") == prim
    os.unlink(ballast)
    tc.create_entity({"PartitionKey": "f", "RowKey": "%05d" % n,
                      "s": VALUE})
    _assert_reads(tc, n + 1)
    assert _primary_name(cluster, "rf3full") == prim
    for p in cluster.pss:
        assert p.running(), "%s stopped" % p.name


def _insync(cluster, table):
    """The table's range in-sync set (server ids) and id -> name."""
    doc = json.loads(cluster.rtctl("status", "--json").stdout)
    by_addr = {cluster.ps_addr(p): p.name for p in cluster.pss}
    names = {s["id"]: by_addr.get(s["addr"]) for s in doc["servers"]}
    rng = [x for x in doc["ranges"] if x["table"] == table]
    assert len(rng) == 1, doc
    return {names[i] for i in rng[0]["insync"]}


def test_rf3_secondary_fs_full(rf3_cluster):
    """At replication factor 3 a secondary's file system fills: the writes
    go on (no client sees an error), the full secondary leaves the in-sync
    set and keeps running, and once its disk is freed it catches up and
    is in sync again."""
    cluster = rf3_cluster
    svc, tc = _client(cluster, "rf3sec")
    svc.create_table("rf3sec")
    tc.create_entity({"PartitionKey": "f", "RowKey": "00000", "s": VALUE})
    prim = _primary_name(cluster, "rf3sec")
    sec = sorted(p.name for p in cluster.pss if p.name != prim)[0]
    data = os.path.join(cluster.workdir, sec)
    st = os.statvfs(data)
    ballast = os.path.join(data, "ballast")
    with open(ballast, "wb") as f:
        f.write(b"\0" * max(0, st.f_bavail * st.f_frsize - (1 << 20)))
        f.flush()
        os.fsync(f.fileno())
    # The secondary still has the blocks it reserved ahead (up to 8 MB):
    # write past them, until it leaves the in-sync set.
    n = 1
    while sec in _insync(cluster, "rf3sec"):
        assert n < 400, "the full secondary stayed in the in-sync set"
        for i in range(n, n + 20):
            tc.create_entity({"PartitionKey": "f", "RowKey": "%05d" % i,
                              "s": VALUE})
        n += 20
    _assert_reads(tc, n)
    os.unlink(ballast)
    tc.create_entity({"PartitionKey": "f", "RowKey": "%05d" % n,
                      "s": VALUE})
    deadline = time.monotonic() + 30
    while sec not in _insync(cluster, "rf3sec"):
        assert time.monotonic() < deadline, "the freed secondary did not " \
            "rejoin the in-sync set"
        time.sleep(0.5)
    _assert_reads(tc, n + 1)
    for p in cluster.pss:
        assert p.running(), "%s stopped" % p.name
