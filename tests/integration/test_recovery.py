"""Recovery (DESIGN §6): a partition server that dies makes its ranges answer
503 ServerBusy until it returns with its data; a master restart alone is
survived by the servers and front ends, which reconnect and resync; a
server whose data file was truncated refuses to start (exit 2) instead of
crashing later; a value changed on disk fails its checksum (500, not data).

One cluster for the module, with a 1 s heartbeat timeout so "down" is quick.
"""

import os
import signal
import subprocess
import time

import pytest
from azure.core.exceptions import HttpResponseError

from rtcluster import Cluster

TABLE = "recovery"


# ------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # Replication factor 1: what one copy does on its own after a restart
    # or with a damaged value (replicated ranges: test_replication,
    # test_repair).
    c = Cluster(tmp_path_factory.mktemp("cluster"), n_ps=3,
                heartbeat_timeout_ms=1000, replication_factor=1)
    c.start()
    yield c
    c.stop(check=False)
    c.check_sanitizers()


@pytest.fixture(scope="module")
def table(cluster):
    tc = cluster.table_service_client().create_table(TABLE)
    for i in range(20):
        tc.create_entity({"PartitionKey": "p%d" % (i % 3),
                          "RowKey": "r%02d" % i, "v": i})
    return tc


# ------------------------------------------------------------ helpers
def owner_of(cluster, table_name):
    """Name (ps1..) of the partition server that owns the table's range."""
    st = cluster.master_status()
    sid = [r["server"] for r in st["ranges"] if r["table"] == table_name]
    assert len(sid) == 1, st
    addr = [s["addr"] for s in st["servers"] if s["id"] == sid[0]][0]
    for p in cluster.pss:
        if "127.0.0.1:%d" % p.ports["rpc"] == addr:
            return p.name
    raise AssertionError("no started server has address %s: %s"
                         % (addr, st))


def wait_until(pred, timeout=15.0, what="condition"):
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "timed out waiting for " + what
        time.sleep(0.1)


def server_states(cluster):
    return {s["addr"]: s["state"]
            for s in cluster.master_status()["servers"]}


# ------------------------------------------------------------ tests
def test_dead_server_gives_server_busy_then_recovers(cluster, table):
    """While the owner is down: 503 ServerBusy; once it is back, with its
    data directory, every entity is there again."""
    name = owner_of(cluster, TABLE)
    addr = "127.0.0.1:%d" % cluster.proc(name).ports["rpc"]
    cluster.kill(name, signal.SIGKILL)
    wait_until(lambda: server_states(cluster).get(addr) == "down",
               what="%s down in /api/status" % name)

    no_retry = cluster.table_service_client(retry_total=0)
    tc = no_retry.get_table_client(TABLE)
    with pytest.raises(HttpResponseError) as ei:
        tc.get_entity("p0", "r00")
    assert ei.value.status_code == 503
    assert ei.value.response.headers.get("x-ms-error-code") == "ServerBusy"

    cluster.start_process(name)
    got = table.get_entity("p1", "r04")
    assert got["v"] == 4
    assert len(list(table.list_entities())) == 20


def test_master_restart_alone(cluster, table):
    """The master restarts on its ports; front ends and servers reconnect;
    reads, writes and table creation work again."""
    cluster.kill("master", signal.SIGTERM)
    cluster.master.reap()
    cluster.start_process("master")
    wait_until(lambda: set(server_states(cluster).values()) == {"up"}
               and len(server_states(cluster)) == 3,
               what="3 servers up after master restart")

    assert table.get_entity("p2", "r05")["v"] == 5
    table.create_entity({"PartitionKey": "p9", "RowKey": "new", "v": 99})
    svc = cluster.table_service_client()
    svc.create_table("aftermaster")
    names = [t.name for t in svc.list_tables()]
    assert TABLE in names and "aftermaster" in names
    assert len(list(table.list_entities())) == 21


def test_truncated_data_file_refused(cluster, table):
    """A partition server whose data.mdb is shorter than its last used
    page refuses to start (exit 2, a message naming the file) instead of
    dying with SIGBUS later; with the file restored it serves again."""
    name = owner_of(cluster, TABLE)
    p = cluster.proc(name)
    datadir = os.path.join(cluster.workdir, name)
    path = os.path.join(datadir, "data.mdb")
    cluster.kill(name, signal.SIGTERM)
    assert p.reap() == 0
    with open(path, "rb") as f:
        saved = f.read()
    assert len(saved) >= 4 * 4096
    with open(path, "r+b") as f:
        f.truncate(len(saved) // 2)

    # Run the binary by hand, with the arguments the cluster uses, so the
    # expected failure is not counted as an unclean exit.
    argv = [p.binary] + p.args() + ["--log-level", "info"]
    t0 = time.monotonic()
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                       cwd=cluster.workdir, env=cluster.env, timeout=10)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 2, err
    assert time.monotonic() - t0 < 5, err
    assert "data file %s is truncated or corrupt: " % path in err, err

    with open(path, "wb") as f:
        f.write(saved)
    cluster.start_process(name)
    assert table.get_entity("p1", "r04")["v"] == 4
    assert len(list(table.list_entities())) == 21


def test_corrupt_value_is_500_not_data(cluster, table):
    """A stored value whose bytes changed on disk fails its checksum: the
    get and a query over it answer 500 InternalError, never the bad data;
    other entities still read, and replacing the entity repairs it."""
    marker = "corrupt-me-%d" % os.getpid()
    table.create_entity({"PartitionKey": "pc", "RowKey": "r", "s": marker})
    name = owner_of(cluster, TABLE)
    path = os.path.join(cluster.workdir, name, "data.mdb")
    cluster.kill(name, signal.SIGTERM)
    assert cluster.proc(name).reap() == 0
    with open(path, "rb") as f:
        data = f.read()
    # Every copy, stale pages included: the live one is among them.
    bad = marker.upper().encode()
    assert data.count(marker.encode()) >= 1
    with open(path, "wb") as f:
        f.write(data.replace(marker.encode(), bad))
    cluster.start_process(name)

    tc = cluster.table_service_client(retry_total=0).get_table_client(TABLE)

    def serving():
        # The restarted server registers and the front end reconnects;
        # until then requests get 503 (not executed), which is not what
        # this test is about.
        try:
            return tc.get_entity("p1", "r04")["v"] == 4
        except HttpResponseError as e:
            assert e.status_code == 503, e
            return False

    wait_until(serving, what="the restarted server to serve")
    for call in (lambda: tc.get_entity("pc", "r"),
                 lambda: list(tc.query_entities("PartitionKey eq 'pc'"))):
        with pytest.raises(HttpResponseError) as ei:
            call()
        assert ei.value.status_code == 500
        assert ei.value.response.headers.get("x-ms-error-code") == \
            "InternalError"
        assert bad.decode() not in ei.value.response.text()
    assert tc.get_entity("p1", "r04")["v"] == 4

    tc.upsert_entity({"PartitionKey": "pc", "RowKey": "r", "s": "fixed"},
                     mode="replace")
    assert tc.get_entity("pc", "r")["s"] == "fixed"


def test_clean_shutdown(cluster):
    """Everything still running stops with status 0, no sanitizer report."""
    cluster.stop()
    cluster.check_sanitizers()
