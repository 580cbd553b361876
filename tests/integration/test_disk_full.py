"""A partition server whose store cannot take writes answers as Azure does
(frontend/README.md, "A full store"): every write, $batch included, gets
503 ServerBusy with x-ms-error-code ServerBusy and the documented text
("The server is currently unable to receive requests. Please retry your
request."), never 500 InternalError; reads go on; writes succeed again as
soon as there is room, and nothing acknowledged is lost.

The store is filled through its LMDB map: one partition server,
replication factor 1 (the full server is the table's only copy), running
with --map-size-mb 1, so its map fills (MDB_MAP_FULL); room returns when
it restarts with the default map.
"""
import sys

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
