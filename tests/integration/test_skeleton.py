"""Walking skeleton: the official Python SDK against a real cluster.

A master, three partition servers and a front end (tests/integration/
rtcluster.py); create a table, insert 100 entities over 7 PartitionKeys, get
one and compare every property and type, query all (one page and pages of
7), the documented errors, a restart of every process that keeps the data,
rtctl status, delete the table, and a clean, sanitizer-free shutdown.

Tests in this module run in order and share the cluster and the table.
"""

import base64
import datetime
import email.utils
import hashlib
import hmac
import http.client
import json
import os
import time
import urllib.error
import urllib.request
import uuid

import pytest
from azure.core.exceptions import (ClientAuthenticationError,
                                   HttpResponseError, ResourceExistsError,
                                   ResourceNotFoundError)
from azure.data.tables import EdmType, EntityProperty

TABLE = "skeleton"
N_ENTITIES = 100

# PartitionKeys: ASCII upper/lower case, a space, a quote, and non-ASCII
# characters. All are in the BMP below U+D800, where UTF-8 byte order (how we
# store) equals UTF-16 code-unit order (how Azure compares), so Python's
# sorted() gives the order the service must return.
PKS = ["Beta", "alpha", "alpha beta", "o'brien", "Zürich", "zeta", "日本語"]
UTC = datetime.timezone.utc


# ------------------------------------------------------------ helpers
def row_key(i):
    """RowKeys with spaces; every 10th also has single and double quotes."""
    rk = "r %03d" % i
    if i % 10 == 3:
        rk += " it's \"quoted\""
    return rk


def make_entity(i):
    return {
        "PartitionKey": PKS[i % len(PKS)],
        "RowKey": row_key(i),
        "name": "Ünïcødé ☃ entity %d" % i,            # Edm.String
        "count": i - 50,                              # Edm.Int32
        "ratio": i / 8 + 0.25,                        # Edm.Double
        "whole": float(i),                            # integral Edm.Double
        "flag": i % 2 == 0,                           # Edm.Boolean
        "when": datetime.datetime(2024, 5, 1, 10, 11, 12, 345678,
                                  tzinfo=UTC)
        + datetime.timedelta(days=i),                 # Edm.DateTime
        "blob": bytes([i, 0, 255, 1]) * 3,            # Edm.Binary
        "id": uuid.UUID(int=(0xC9DA6455213D42C99A793E9149A57800 + i)),
        "big": EntityProperty(2 ** 40 + i, EdmType.INT64),  # Edm.Int64
    }


def expected_order():
    keys = [(PKS[i % len(PKS)], row_key(i)) for i in range(N_ENTITIES)]
    return sorted(keys)


def code_of(err):
    """The Azure error code of an SDK exception. Some SDK calls (e.g.
    create_entity in 12.4) re-raise the undecoded error, so fall back to the
    x-ms-error-code response header."""
    c = getattr(err, "error_code", None)
    c = getattr(c, "value", c)
    if c is None and getattr(err, "response", None) is not None:
        c = err.response.headers.get("x-ms-error-code")
    return c


def assert_entity_equal(got, want):
    """Every property and its type, as the SDK hands them back."""
    assert got["PartitionKey"] == want["PartitionKey"]
    assert got["RowKey"] == want["RowKey"]
    extra = set(got.keys()) - set(want.keys())
    assert not extra, "unexpected properties %s" % extra
    for name, w in want.items():
        g = got[name]
        if isinstance(w, EntityProperty):
            assert isinstance(g, EntityProperty), (name, g)
            assert g.edm_type == w.edm_type and g.value == w.value, (name, g)
        elif isinstance(w, bool):
            assert type(g) is bool and g == w, (name, g)
        elif isinstance(w, int):
            assert type(g) is int and g == w, (name, g)
        elif isinstance(w, float):
            assert type(g) is float and g == w, (name, g)
        elif isinstance(w, datetime.datetime):
            assert isinstance(g, datetime.datetime), (name, g)
            assert g == w, (name, g)
        elif isinstance(w, bytes):
            assert type(g) is bytes and g == w, (name, g)
        elif isinstance(w, uuid.UUID):
            assert isinstance(g, uuid.UUID) and g == w, (name, g)
        else:
            assert type(g) is str and g == w, (name, g)
    ts = got.metadata.get("timestamp")
    assert isinstance(ts, datetime.datetime), got.metadata
    assert got.metadata.get("etag"), got.metadata


def all_keys(table_client, **kw):
    return [(e["PartitionKey"], e["RowKey"])
            for e in table_client.list_entities(**kw)]


# ------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def svc(cluster):
    return cluster.table_service_client()


@pytest.fixture(scope="module")
def table(svc):
    """The test table with the 100 entities in it."""
    tc = svc.create_table(TABLE)
    for i in range(N_ENTITIES):
        tc.create_entity(make_entity(i))
    return tc


# ------------------------------------------------------------ tests
def test_cluster_is_up(cluster):
    """The master reports three partition servers up."""
    st = cluster.master_status()
    assert [s["state"] for s in st["servers"]].count("up") == 3, st


def test_master_http_basics(cluster):
    """The master's status listener: GET /health is 200 "ok", a method it
    does not serve is 405, an unknown path 404."""
    base = "http://%s" % cluster.master_http_addr

    def call(method, path):
        req = urllib.request.Request(base + path, method=method)
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    assert call("GET", "/health") == (200, b"ok")
    assert call("PUT", "/api/status")[0] == 405
    assert call("DELETE", "/health")[0] == 405
    assert call("GET", "/nope")[0] == 404


def test_get_entity_roundtrips_every_type(table):
    """An entity read back has the properties and types it was written
    with."""
    for i in (0, 13, 42, 99):
        want = make_entity(i)
        got = table.get_entity(want["PartitionKey"], want["RowKey"])
        assert_entity_equal(got, want)


def test_query_all_in_key_order(table):
    """A query returns all 100 entities ordered by PartitionKey, RowKey."""
    ents = list(table.list_entities())
    assert len(ents) == N_ENTITIES
    assert [(e["PartitionKey"], e["RowKey"]) for e in ents] == \
        expected_order()
    by_key = {(e["PartitionKey"], e["RowKey"]): e for e in ents}
    want = make_entity(57)
    assert_entity_equal(by_key[(want["PartitionKey"], want["RowKey"])], want)


def test_query_paged_with_continuation(table):
    """Pages of at most 7 with continuation tokens give the same order."""
    pages = [[(e["PartitionKey"], e["RowKey"]) for e in page] for page in
             table.list_entities(results_per_page=7).by_page()]
    sizes = [len(p) for p in pages]
    assert all(s <= 7 for s in sizes), sizes
    assert len(pages) >= -(-N_ENTITIES // 7), sizes
    assert [k for p in pages for k in p] == expected_order(), sizes


def test_list_tables_has_table(svc, table):
    """Query Tables lists the new table."""
    assert TABLE in [t.name for t in svc.list_tables()]


def test_create_existing_table_conflicts(svc, table):
    """Create Table on an existing name: 409 TableAlreadyExists."""
    with pytest.raises(ResourceExistsError) as ei:
        svc.create_table(TABLE)
    assert ei.value.status_code == 409
    assert code_of(ei.value) == "TableAlreadyExists"
    # Table names are case-insensitive.
    with pytest.raises(ResourceExistsError):
        svc.create_table(TABLE.upper())


def test_get_missing_entity_not_found(table):
    """Get Entity on a missing key: 404 ResourceNotFound."""
    with pytest.raises(ResourceNotFoundError) as ei:
        table.get_entity("alpha", "no such row")
    assert ei.value.status_code == 404
    assert code_of(ei.value) == "ResourceNotFound"


def test_insert_duplicate_conflicts(table):
    """Insert Entity on an existing key: 409 EntityAlreadyExists."""
    with pytest.raises(ResourceExistsError) as ei:
        table.create_entity(make_entity(5))
    assert ei.value.status_code == 409
    assert code_of(ei.value) == "EntityAlreadyExists"


def test_bad_signature_forbidden(cluster, table):
    """A request signed with the wrong key: 403 AuthenticationFailed."""
    wrong = base64.b64encode(b"\x01" * 64).decode()
    bad = cluster.table_service_client(key=wrong)
    with pytest.raises((ClientAuthenticationError, HttpResponseError)) as ei:
        list(bad.list_tables())
    assert ei.value.status_code == 403
    assert code_of(ei.value) == "AuthenticationFailed"
    with pytest.raises((ClientAuthenticationError, HttpResponseError)) as ei:
        bad.get_table_client(TABLE).get_entity("alpha", row_key(1))
    assert ei.value.status_code == 403


# ------------------------------------------------------------ raw HTTP
def _sign(cluster, verb, path, content_type="", key=None):
    """SharedKey (Table) headers for @path (the raw, encoded request path,
    which starts with /devstoreaccount1); @key overrides the account key."""
    date = email.utils.formatdate(usegmt=True)
    resource = "/%s%s" % (cluster.account, path.split("?")[0])
    sts = "\n".join([verb, "", content_type, date, resource])
    sig = base64.b64encode(hmac.new(base64.b64decode(key or cluster.key),
                                    sts.encode(), hashlib.sha256).digest())
    return {
        "x-ms-date": date,
        "x-ms-version": "2019-02-02",
        "Accept": "application/json;odata=minimalmetadata",
        "DataServiceVersion": "3.0",
        "MaxDataServiceVersion": "3.0;NetFx",
        "Authorization": "SharedKey %s:%s" % (cluster.account, sig.decode()),
    }


def _request(cluster, verb, path, headers):
    conn = http.client.HTTPConnection("127.0.0.1", cluster.fe_port,
                                      timeout=30)
    try:
        conn.request(verb, path, headers=headers)
        r = conn.getresponse()
        return r, r.read()
    finally:
        conn.close()


def _check_common_headers(r, what):
    for h in ("x-ms-request-id", "x-ms-version", "Date"):
        assert r.getheader(h), "%s: no %s header in %s" % (
            what, h, r.getheaders())
    assert email.utils.parsedate_to_datetime(r.getheader("Date")), what


def _check_error(r, body, status, code, what):
    assert r.status == status, (what, r.status, body)
    _check_common_headers(r, what)
    assert r.getheader("x-ms-error-code") == code, (what, r.getheaders())
    assert "json" in (r.getheader("Content-Type") or ""), r.getheaders()
    doc = json.loads(body)
    assert doc["odata.error"]["code"] == code, doc
    assert isinstance(doc["odata.error"]["message"]["value"], str), doc


def test_raw_http_headers_and_errors(cluster, table):
    """Every response carries x-ms-request-id, x-ms-version and Date; errors
    add x-ms-error-code and a JSON odata.error body."""
    acct = "/" + cluster.account

    path = acct + "/Tables"
    r, body = _request(cluster, "GET", path, _sign(cluster, "GET", path))
    assert r.status == 200, body
    _check_common_headers(r, "GET /Tables")
    assert TABLE in [t["TableName"] for t in json.loads(body)["value"]]

    # 'alpha' holds the entities with i % 7 == 1, so "r 000" is not there.
    path = acct + "/%s(PartitionKey='alpha',RowKey='r%%20000')" % TABLE
    r, body = _request(cluster, "GET", path, _sign(cluster, "GET", path))
    _check_error(r, body, 404, "ResourceNotFound", "missing entity")

    path = acct + "/%s(PartitionKey='alpha',RowKey='r%%20001')" % TABLE
    r, body = _request(cluster, "GET", path, _sign(cluster, "GET", path))
    assert r.status == 200, body
    _check_common_headers(r, "get entity")
    assert r.getheader("ETag"), r.getheaders()
    assert json.loads(body)["RowKey"] == "r 001"

    path = acct + "/nosuchtable()"
    r, body = _request(cluster, "GET", path, _sign(cluster, "GET", path))
    _check_error(r, body, 404, "TableNotFound", "query missing table")

    path = acct + "/Tables"
    wrong = base64.b64encode(b"\x02" * 64).decode()
    r, body = _request(cluster, "GET", path,
                       _sign(cluster, "GET", path, key=wrong))
    _check_error(r, body, 403, "AuthenticationFailed", "bad signature")


def test_request_id_reaches_master_and_partition_server(cluster):
    """The front end's x-ms-request-id travels with the RPCs a request
    causes: the master's log line for the table it created and the
    partition server's line for the range it was assigned name it."""
    name = "reqidtrail"
    path = "/" + cluster.account + "/Tables"
    headers = _sign(cluster, "POST", path, content_type="application/json")
    headers["Content-Type"] = "application/json"
    conn = http.client.HTTPConnection("127.0.0.1", cluster.fe_port,
                                      timeout=30)
    try:
        conn.request("POST", path, body=json.dumps({"TableName": name}),
                     headers=headers)
        r = conn.getresponse()
        body = r.read()
    finally:
        conn.close()
    assert r.status == 201, body
    rid = r.getheader("x-ms-request-id")
    assert rid, r.getheaders()
    tag = "req=%s " % rid

    def lines(proc):
        with open(proc.stderr_path, errors="replace") as f:
            return [ln for ln in f if tag in ln]

    deadline = time.time() + 5
    while True:
        ms = lines(cluster.proc("master"))
        ps = [ln for p in cluster.pss for ln in lines(p)]
        if (ms and ps) or time.time() > deadline:
            break
        time.sleep(0.05)
    assert any(name in ln for ln in ms), "master: no line with %s" % tag
    assert ps, "no partition-server line with %s" % tag


def test_concurrent_inserts(cluster):
    """16 clients inserting at once (the front end pipelines them to the
    partition server) all succeed, and a query sees every entity."""
    import concurrent.futures

    svc = cluster.table_service_client()
    tc = svc.create_table("concurrent")
    n_threads, per_thread = 16, 20

    def work(t):
        c = cluster.table_service_client().get_table_client("concurrent")
        for j in range(per_thread):
            c.create_entity({"PartitionKey": "p%02d" % (t % 5),
                             "RowKey": "t%02d-%03d" % (t, j), "v": j})
        return t

    with concurrent.futures.ThreadPoolExecutor(n_threads) as ex:
        assert sorted(ex.map(work, range(n_threads))) == \
            list(range(n_threads))
    keys = all_keys(tc)
    assert len(keys) == n_threads * per_thread
    assert keys == sorted(keys)
    svc.delete_table("concurrent")


# ------------------------------------------------------------ restart
def test_restart_keeps_data(cluster, svc, table):
    """After every process restarts (same data dirs), all 100 entities are
    there and read back unchanged."""
    cluster.restart()
    tc = svc.get_table_client(TABLE)
    for i in (1, 50, 98):
        want = make_entity(i)
        assert_entity_equal(tc.get_entity(want["PartitionKey"],
                                          want["RowKey"]), want)
    assert all_keys(tc) == expected_order()
    assert all_keys(tc, results_per_page=7) == expected_order()
    assert TABLE in [t.name for t in svc.list_tables()]


def test_rtctl_status(cluster, table):
    """rtctl status --json: three servers up, one range covering the table;
    the text form names the table."""
    r = cluster.rtctl("status", "--json")
    st = json.loads(r.stdout)
    servers = st["servers"]
    assert len([s for s in servers if s["state"] == "up"]) == 3, st
    for s in servers:
        assert {"id", "addr", "state"} <= set(s), s
    ranges = [g for g in st["ranges"] if g["table"] == TABLE]
    assert len(ranges) == 1, st
    rg = ranges[0]
    assert {"id", "table", "low", "high", "server", "epoch"} <= set(rg), rg
    assert rg["low"] == "" and rg["high"] is None, rg
    assert rg["server"] in [s["id"] for s in servers], rg
    assert rg["epoch"] >= 1, rg
    # Replica sets (the master's default, replication factor 3, on three
    # servers): every server holds a copy, the owner is the primary, all
    # three are in sync; every server registered its incarnation (16
    # bytes, hex) and zone.
    ids = sorted(s["id"] for s in servers)
    assert sorted(rg["replicas"]) == ids, rg
    assert rg["primary"] == rg["server"], rg
    assert sorted(rg["insync"]) == ids, rg
    for s in servers:
        assert s["zone"] == "", s
        assert len(s["incarnation"]) == 32, s
        int(s["incarnation"], 16)
    assert len({s["incarnation"] for s in servers}) == len(servers), servers

    r = cluster.rtctl("status")
    assert TABLE in r.stdout, r.stdout
    assert "REPLICAS" in r.stdout, r.stdout
    # Every table of the text form has its heading, the masters' too.
    for heading in ("MASTERS", "SERVERS", "RANGES"):
        assert "\n%s\n" % heading in "\n" + r.stdout, r.stdout


# ------------------------------------------------------------ delete
def test_delete_table(svc, table):
    """Delete Table: gone from Query Tables; queries get 404
    TableNotFound."""
    svc.delete_table(TABLE)
    assert TABLE not in [t.name for t in svc.list_tables()]
    with pytest.raises(ResourceNotFoundError) as ei:
        list(svc.get_table_client(TABLE).list_entities())
    assert code_of(ei.value) == "TableNotFound"
    with pytest.raises(ResourceNotFoundError):
        svc.get_table_client(TABLE).get_entity("alpha", row_key(1))


def test_rtctl_after_delete(cluster):
    """The deleted table has no ranges left."""
    st = json.loads(cluster.rtctl("status", "--json").stdout)
    assert not [g for g in st["ranges"] if g["table"] == TABLE], st


class _FakeMaster:
    """A master that is not the leader, on a loopback port: 307 to the
    leader's HTTP address (same path), or, with leader None, 503 "no master
    leader" (docs/DESIGN-master-ha.md §5.2)."""

    def __init__(self, leader):
        import http.server
        import threading
        fake = self
        self.hits = 0

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self):
                fake.hits += 1
                if leader:
                    self.send_response(307)
                    self.send_header("Location",
                                     "http://%s%s" % (leader, self.path))
                    body = b""
                else:
                    self.send_response(503)
                    body = json.dumps({"error": "no master leader",
                                       "reachable": [], "quorum": 2}).encode()
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = _answer
            do_POST = _answer

            def log_message(self, *args):
                pass

        self.srv = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        self.addr = "127.0.0.1:%d" % self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


def _dead_addr():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    addr = "127.0.0.1:%d" % s.getsockname()[1]
    s.close()
    return addr


def test_rtctl_follows_leader(cluster):
    """--master-http as a list: a dead master and one with no leader are
    passed over, a follower's 307 is followed to the leader; when every
    address fails, the error names each one tried."""
    import subprocess
    follower = _FakeMaster(cluster.master_http_addr)
    noleader = _FakeMaster(None)
    dead = _dead_addr()
    try:
        rtctl = cluster.bins["rtctl"]
        lst = ",".join([dead, noleader.addr, follower.addr])
        r = subprocess.run([rtctl, "--master-http", lst, "status", "--json"],
                           capture_output=True, text=True, timeout=30,
                           env=cluster.env)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["servers"], r.stdout
        assert noleader.hits == 1 and follower.hits == 1
        env = dict(cluster.env, RT_MASTER_HTTP="%s,%s" % (dead,
                                                            noleader.addr))
        # A master that knows no leader is asked again (an election is
        # short) until --timeout.
        hits = noleader.hits
        r = subprocess.run([rtctl, "--timeout", "1", "status"],
                           capture_output=True, text=True, timeout=30,
                           env=env)
        assert r.returncode == 1
        assert dead in r.stderr and noleader.addr in r.stderr, r.stderr
        assert noleader.hits - hits >= 3, noleader.hits - hits
        r = subprocess.run([rtctl, "--master-http", "%s,%s" % (noleader.addr,
                                                                dead),
                            "--timeout", "1", "events", "--limit", "1"],
                           capture_output=True, text=True, timeout=30,
                           env=cluster.env)
        assert r.returncode == 1
        assert "no master leader" in r.stderr, r.stderr
    finally:
        follower.close()
        noleader.close()


def test_clean_shutdown(cluster):
    """SIGTERM stops every process with status 0 and no sanitizer
    report."""
    cluster.stop()
    cluster.check_sanitizers()
    print("logs in", cluster.logdir, os.listdir(cluster.logdir))
