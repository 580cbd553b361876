"""Entity group transactions (POST /$batch, docs/table-api-spec.md §5)
against a real cluster.

The Python SDK's TableClient.submit_transaction for every operation kind
and every batch rule (100 ops, 101 ops, mixed PartitionKeys, duplicate
rows, failures in the middle that must leave nothing applied, If-Match
mismatches, a missing table, a body over 4 MiB), then raw HTTP for what the
SDK hides: the multipart response byte layout (what the JS SDK's regexes
need), Content-ID echo, LF-only and relative-URL requests, the single-GET
batch, malformed multipart, auth. When the JavaScript SDK is available
(RT_JS_SDK_DIR, or <build>/js/node_modules/@azure/data-tables, where
test_sdk_js.py installs it) its submitTransaction runs too.

Each test works in its own table; the module shares one cluster, whose
daemons are checked for sanitizer reports at teardown.
"""

import base64
import concurrent.futures
import datetime
import email.parser
import email.policy
import email.utils
import hashlib
import hmac
import http.client
import itertools
import json
import os
import re
import shutil
import subprocess
import uuid
import xml.etree.ElementTree as ET

import pytest
from azure.core import MatchConditions
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.data.tables import (EdmType, EntityProperty, RequestTooLargeError,
                               TableTransactionError, UpdateMode)
from azure.data.tables._table_batch import TableBatchOperations

UTC = datetime.timezone.utc
_names = itertools.count()


# ------------------------------------------------------------ helpers
def code_of(err):
    c = getattr(err, "error_code", None)
    c = getattr(c, "value", c)
    if c is None and getattr(err, "response", None) is not None:
        c = err.response.headers.get("x-ms-error-code")
    return c


def keys_of(tc):
    # The Python SDK drops an empty RowKey from the entity it hands back.
    return sorted((e["PartitionKey"], e.get("RowKey", ""))
                  for e in tc.list_entities())


def snapshot(tc):
    """Every entity with its properties and ETag, for before/after
    comparisons."""
    return {(e["PartitionKey"], e.get("RowKey", "")):
            (dict(e), e.metadata["etag"]) for e in tc.list_entities()}


def assert_tx_error(ei, index, status, code):
    e = ei.value
    assert isinstance(e, TableTransactionError), repr(e)
    assert e.index == index, (e.index, str(e))
    assert e.status_code == status, (e.status_code, str(e))
    assert code_of(e) == code, (code_of(e), str(e))
    assert str(e.message).startswith("%d:" % index), e.message


@pytest.fixture(scope="module")
def svc(cluster):
    return cluster.table_service_client()


@pytest.fixture
def tc(svc):
    """A fresh table for one test."""
    name = "batch%d%s" % (next(_names), uuid.uuid4().hex[:6])
    t = svc.create_table(name)
    yield t
    svc.delete_table(name)


# ------------------------------------------------------------ raw HTTP
def _sign(cluster, verb, path, content_type=""):
    date = email.utils.formatdate(usegmt=True)
    resource = "/%s%s" % (cluster.account, path.split("?")[0])
    sts = "\n".join([verb, "", content_type, date, resource])
    sig = base64.b64encode(hmac.new(base64.b64decode(cluster.key),
                                    sts.encode(), hashlib.sha256).digest())
    return {
        "x-ms-date": date,
        "x-ms-version": "2019-02-02",
        "Accept": "application/json",
        "DataServiceVersion": "3.0",
        "MaxDataServiceVersion": "3.0;NetFx",
        "Authorization": "SharedKey %s:%s" % (cluster.account, sig.decode()),
    }


def raw_batch(cluster, body, boundary="batch_raw", content_type=None,
              sign=True, verb="POST", version=None):
    """POSTs @body (str or bytes) to /$batch; returns (response, bytes).
    @version replaces x-ms-version (and drops Accept, which names JSON:
    versions before 2013-08-15 refuse it)."""
    if isinstance(body, str):
        body = body.encode()
    ct = content_type or "multipart/mixed; boundary=%s" % boundary
    path = "/%s/$batch" % cluster.account
    headers = _sign(cluster, verb, path, ct) if sign else {}
    if version:
        headers["x-ms-version"] = version
        headers.pop("Accept", None)
    headers["Content-Type"] = ct
    conn = http.client.HTTPConnection("127.0.0.1", cluster.fe_port,
                                      timeout=30)
    try:
        conn.request(verb, path, body=body, headers=headers)
        r = conn.getresponse()
        return r, r.read()
    finally:
        conn.close()


def changeset(parts, batch="batch_raw", cs="changeset_raw", eol="\r\n"):
    """A batch body with one changeset; @parts are (content_id or None,
    inner request text with '\\n' line ends)."""
    out = ["--%s" % batch,
           "Content-Type: multipart/mixed; boundary=%s" % cs, ""]
    for cid, req in parts:
        out += ["--%s" % cs, "Content-Type: application/http",
                "Content-Transfer-Encoding: binary"]
        if cid is not None:
            out.append("Content-ID: %s" % cid)
        out += [""] + req.split("\n")
    out += ["--%s--" % cs, "--%s--" % batch, ""]
    return eol.join(out)


def insert_req(cluster, table, entity, prefer="return-no-content",
               absolute=True):
    url = ("http://127.0.0.1:%d/%s/%s" % (cluster.fe_port, cluster.account,
                                         table)) if absolute else table
    lines = ["POST %s HTTP/1.1" % url,
             "Content-Type: application/json;odata=nometadata",
             "Accept: application/json;odata=minimalmetadata",
             "DataServiceVersion: 3.0"]
    if prefer:
        lines.append("Prefer: %s" % prefer)
    return "\n".join(lines + ["", json.dumps(entity)])


def entity_url(table, pk, rk):
    q = lambda s: s.replace("'", "''")  # noqa: E731
    return "%s(PartitionKey='%s',RowKey='%s')" % (table, q(pk), q(rk))


def parse_multipart(content_type, body):
    """Parses a batch response the way azure-core does (email parser), and
    returns [(status, headers, body_bytes)] in order, flattening the
    changeset."""
    msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + body)
    assert msg.is_multipart(), body
    out = []

    def walk(m):
        for part in m.iter_parts():
            if part.get_content_type() == "multipart/mixed":
                walk(part)
                continue
            assert part.get_content_type() == "application/http", part
            raw = part.get_payload(decode=True)
            head, _, pbody = raw.partition(b"\r\n\r\n")
            lines = head.decode().split("\r\n")
            m2 = re.match(r"HTTP/1\.1 (\d+) ", lines[0])
            assert m2, lines[0]
            hdrs = {}
            for ln in lines[1:]:
                k, _, v = ln.partition(":")
                hdrs[k.strip()] = v.strip()
            out.append((int(m2.group(1)), hdrs, pbody))
    walk(msg)
    return out


def js_parse(body):
    """The JS SDK's parseTransactionResponse, in Python: split on
    '--changesetresponse_', status and ETag by regex, any {...} is an
    error."""
    text = body.decode()
    pieces = text.split("--changesetresponse_")[1:-1]
    res = []
    for p in pieces:
        st = re.search(r"HTTP/1.1 ([0-9]*)", p)
        assert st, p
        res.append({"status": int(st.group(1)),
                    "error": re.search(r"\{(.*)\}", p) is not None,
                    "etag": (re.search(r"ETag: (.*)", p).group(1).rstrip("\r")
                             if re.search(r"ETag: (.*)", p) else None),
                    "rowKey": (re.search(r"RowKey='(.*)'", p).group(1)
                               if re.search(r"RowKey='(.*)'", p) else None)})
    return res


def check_202(r, body):
    assert r.status == 202, (r.status, body)
    ct = r.getheader("Content-Type")
    assert re.fullmatch(r"multipart/mixed; boundary=batchresponse_"
                        r"[0-9a-f-]{36}", ct), ct
    for h in ("x-ms-request-id", "x-ms-version", "Date"):
        assert r.getheader(h), (h, r.getheaders())
    return parse_multipart(ct, body)


def check_error(r, body, status, code):
    assert r.status == status, (r.status, body)
    assert r.getheader("x-ms-error-code") == code, r.getheaders()
    doc = json.loads(body)
    assert doc["odata.error"]["code"] == code, doc


# ------------------------------------------------------------ SDK: success
def test_insert_batch_returns_etags(tc):
    """Five inserts in one transaction: five results in order, each ETag
    the one the entity then has."""
    ents = [{"PartitionKey": "p", "RowKey": "r%d" % i, "n": i}
            for i in range(5)]
    res = tc.submit_transaction([("create", e) for e in ents])
    assert len(res) == 5
    for e, r in zip(ents, res):
        got = tc.get_entity("p", e["RowKey"])
        assert got["n"] == e["n"]
        assert r["etag"] == got.metadata["etag"], (r, got.metadata)
        assert r["etag"].startswith("W/\"datetime'"), r


def test_mixed_operations(tc):
    """create, merge, replace, upsert-merge, upsert-replace and delete in one
    transaction each do what they do standalone."""
    for rk in ("m", "r", "um", "ur", "d"):
        tc.create_entity({"PartitionKey": "p", "RowKey": rk, "old": 1,
                          "keep": "k"})
    res = tc.submit_transaction([
        ("create", {"PartitionKey": "p", "RowKey": "new", "a": 1}),
        ("update", {"PartitionKey": "p", "RowKey": "m", "old": 2},
         {"mode": UpdateMode.MERGE}),
        ("update", {"PartitionKey": "p", "RowKey": "r", "x": 3},
         {"mode": UpdateMode.REPLACE}),
        ("upsert", {"PartitionKey": "p", "RowKey": "um", "y": 4},
         {"mode": UpdateMode.MERGE}),
        ("upsert", {"PartitionKey": "p", "RowKey": "ur", "z": 5},
         {"mode": UpdateMode.REPLACE}),
        ("delete", {"PartitionKey": "p", "RowKey": "d"}),
        ("upsert", {"PartitionKey": "p", "RowKey": "fresh", "f": 6}),
    ])
    assert len(res) == 7
    assert "etag" not in res[5]
    got = {e["RowKey"]: {k: v for k, v in e.items()
                         if k not in ("PartitionKey", "RowKey")}
           for e in tc.list_entities()}
    assert got == {
        "new": {"a": 1},
        "m": {"old": 2, "keep": "k"},
        "r": {"x": 3},
        "um": {"old": 1, "keep": "k", "y": 4},
        "ur": {"z": 5},
        "fresh": {"f": 6},
    }, got


def test_update_with_matching_etag(tc):
    """Update and delete conditioned on the current ETag succeed."""
    e1 = tc.create_entity({"PartitionKey": "p", "RowKey": "1", "v": 1})
    e2 = tc.create_entity({"PartitionKey": "p", "RowKey": "2", "v": 1})
    tc.submit_transaction([
        ("update", {"PartitionKey": "p", "RowKey": "1", "v": 2},
         {"mode": UpdateMode.REPLACE, "etag": e1["etag"],
          "match_condition": MatchConditions.IfNotModified}),
        ("delete", {"PartitionKey": "p", "RowKey": "2"},
         {"etag": e2["etag"],
          "match_condition": MatchConditions.IfNotModified}),
    ])
    assert tc.get_entity("p", "1")["v"] == 2
    assert keys_of(tc) == [("p", "1")]


def test_every_type_in_batch(tc):
    """Entities inserted by a batch read back with every Edm type."""
    ent = {
        "PartitionKey": "p", "RowKey": "types",
        "s": "Ünïcødé ☃", "i": -42, "d": 2.5, "whole": 3.0, "b": True,
        "dt": datetime.datetime(2024, 5, 1, 10, 11, 12, 345678, tzinfo=UTC),
        "bin": b"\x00\x01\xff", "g": uuid.UUID(int=12345),
        "big": EntityProperty(2 ** 40 + 1, EdmType.INT64),
    }
    tc.submit_transaction([("create", ent),
                           ("upsert", dict(ent, RowKey="types2"))])
    for rk in ("types", "types2"):
        got = tc.get_entity("p", rk)
        for k, v in ent.items():
            if k == "RowKey":
                continue
            if isinstance(v, EntityProperty):
                assert got[k].value == v.value and \
                    got[k].edm_type == v.edm_type
            else:
                assert got[k] == v and isinstance(got[k], type(v)), \
                    (k, got[k])


def test_special_keys(tc):
    """Keys with quotes, spaces, '%', parentheses and non-ASCII survive the
    inner URLs, and a later batch can delete them."""
    pk = "p 'q' (ü)%"
    rks = ["a'b", "c d", "e%20f", "(g)", "日本", "h''i", ""]
    tc.submit_transaction([("create", {"PartitionKey": pk, "RowKey": rk,
                                       "v": i}) for i, rk in enumerate(rks)])
    assert keys_of(tc) == sorted((pk, rk) for rk in rks)
    tc.submit_transaction([("update", {"PartitionKey": pk, "RowKey": rk,
                                       "w": 1}) for rk in rks])
    assert all(e["w"] == 1 and "v" in e for e in tc.list_entities())
    tc.submit_transaction([("delete", {"PartitionKey": pk, "RowKey": rk})
                           for rk in rks])
    assert keys_of(tc) == []


def test_hundred_ops(tc):
    """100 operations is the limit and is accepted."""
    res = tc.submit_transaction([
        ("create", {"PartitionKey": "p", "RowKey": "%03d" % i, "i": i})
        for i in range(100)])
    assert len(res) == 100
    assert len(keys_of(tc)) == 100


def test_concurrent_batches(cluster, tc):
    """Batches on different PartitionKeys from many threads all apply."""
    name = tc.table_name

    def work(t):
        c = cluster.table_service_client().get_table_client(name)
        for j in range(3):
            c.submit_transaction([
                ("create", {"PartitionKey": "t%02d" % t,
                            "RowKey": "%d-%02d" % (j, k)})
                for k in range(10)])
        return t

    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        assert sorted(ex.map(work, range(8))) == list(range(8))
    assert len(keys_of(tc)) == 8 * 3 * 10


# ------------------------------------------------------------ SDK: errors
def test_101_ops_rejected(tc):
    """101 operations: 400 InvalidInput at index 99 with the service's
    message; nothing applied."""
    with pytest.raises(TableTransactionError) as ei:
        tc.submit_transaction([
            ("create", {"PartitionKey": "p", "RowKey": "%03d" % i})
            for i in range(101)])
    assert_tx_error(ei, 99, 400, "InvalidInput")
    assert "exceeds the maximum 100 changes per change set" in \
        ei.value.message
    assert keys_of(tc) == []


def test_mixed_partition_keys(tc, monkeypatch):
    """Operations on two PartitionKeys (the SDK's own check bypassed): 400
    CommandsInBatchActOnDifferentPartitions at the first op naming the
    second key; nothing applied."""
    monkeypatch.setattr(TableBatchOperations, "_verify_partition_key",
                        lambda self, entity: None)
    with pytest.raises(TableTransactionError) as ei:
        tc.submit_transaction([
            ("create", {"PartitionKey": "a", "RowKey": "1"}),
            ("create", {"PartitionKey": "a", "RowKey": "2"}),
            ("create", {"PartitionKey": "a", "RowKey": "3"}),
            ("upsert", {"PartitionKey": "b", "RowKey": "4"}),
            ("create", {"PartitionKey": "a", "RowKey": "5"}),
        ])
    assert_tx_error(ei, 3, 400, "CommandsInBatchActOnDifferentPartitions")
    assert keys_of(tc) == []


def test_duplicate_row(tc):
    """The same entity twice: 400 InvalidDuplicateRow at the second."""
    with pytest.raises(TableTransactionError) as ei:
        tc.submit_transaction([
            ("create", {"PartitionKey": "p", "RowKey": "1"}),
            ("create", {"PartitionKey": "p", "RowKey": "2"}),
            ("upsert", {"PartitionKey": "p", "RowKey": "1", "x": 1}),
        ])
    assert_tx_error(ei, 2, 400, "InvalidDuplicateRow")
    assert keys_of(tc) == []


def test_failure_in_middle_applies_nothing(tc):
    """An insert of an existing row at index 5 of 10 fails with 409
    EntityAlreadyExists at index 5; no other operation (inserts, updates,
    deletes before and after it) is applied."""
    for rk in ("u1", "u2", "dup", "del"):
        tc.create_entity({"PartitionKey": "p", "RowKey": rk, "v": 0})
    before = snapshot(tc)
    ops = [
        ("create", {"PartitionKey": "p", "RowKey": "n0"}),
        ("update", {"PartitionKey": "p", "RowKey": "u1", "v": 1},
         {"mode": UpdateMode.REPLACE}),
        ("create", {"PartitionKey": "p", "RowKey": "n1"}),
        ("delete", {"PartitionKey": "p", "RowKey": "del"}),
        ("upsert", {"PartitionKey": "p", "RowKey": "n2"}),
        ("create", {"PartitionKey": "p", "RowKey": "dup", "v": 9}),
        ("create", {"PartitionKey": "p", "RowKey": "n3"}),
        ("update", {"PartitionKey": "p", "RowKey": "u2", "v": 1},
         {"mode": UpdateMode.MERGE}),
        ("upsert", {"PartitionKey": "p", "RowKey": "n4"},
         {"mode": UpdateMode.REPLACE}),
        ("create", {"PartitionKey": "p", "RowKey": "n5"}),
    ]
    with pytest.raises(TableTransactionError) as ei:
        tc.submit_transaction(ops)
    assert_tx_error(ei, 5, 409, "EntityAlreadyExists")
    assert snapshot(tc) == before


def test_if_match_mismatch(tc):
    """A stale ETag at index 2: 412 UpdateConditionNotSatisfied at index 2;
    nothing applied."""
    e = tc.create_entity({"PartitionKey": "p", "RowKey": "x", "v": 1})
    tc.update_entity({"PartitionKey": "p", "RowKey": "x", "v": 2})
    before = snapshot(tc)
    with pytest.raises(TableTransactionError) as ei:
        tc.submit_transaction([
            ("create", {"PartitionKey": "p", "RowKey": "a"}),
            ("create", {"PartitionKey": "p", "RowKey": "b"}),
            ("update", {"PartitionKey": "p", "RowKey": "x", "v": 3},
             {"etag": e["etag"],
              "match_condition": MatchConditions.IfNotModified}),
        ])
    assert_tx_error(ei, 2, 412, "UpdateConditionNotSatisfied")
    assert snapshot(tc) == before


def test_missing_entity(tc):
    """Update and delete of a missing entity: 404 ResourceNotFound at its
    index."""
    tc.create_entity({"PartitionKey": "p", "RowKey": "here"})
    with pytest.raises(TableTransactionError) as ei:
        tc.submit_transaction([
            ("delete", {"PartitionKey": "p", "RowKey": "here"}),
            ("delete", {"PartitionKey": "p", "RowKey": "gone"}),
        ])
    assert_tx_error(ei, 1, 404, "ResourceNotFound")
    with pytest.raises(TableTransactionError) as ei:
        tc.submit_transaction([
            ("update", {"PartitionKey": "p", "RowKey": "gone", "v": 1},
             {"mode": UpdateMode.MERGE})])
    assert_tx_error(ei, 0, 404, "ResourceNotFound")
    assert keys_of(tc) == [("p", "here")]


def test_missing_table(svc):
    """A batch on a table that does not exist: 404 TableNotFound at
    index 0."""
    t = svc.get_table_client("nosuchtable%s" % uuid.uuid4().hex[:8])
    with pytest.raises(TableTransactionError) as ei:
        t.submit_transaction([("create", {"PartitionKey": "p",
                                          "RowKey": "1"})])
    assert_tx_error(ei, 0, 404, "TableNotFound")


def test_bad_entity_in_batch(tc):
    """An invalid property name in op 1: 400 PropertyNameInvalid at
    index 1, nothing sent to the cluster."""
    with pytest.raises(TableTransactionError) as ei:
        tc.submit_transaction([
            ("create", {"PartitionKey": "p", "RowKey": "1"}),
            ("create", {"PartitionKey": "p", "RowKey": "2", "bad-name": 1}),
        ])
    assert_tx_error(ei, 1, 400, "PropertyNameInvalid")
    assert keys_of(tc) == []


def test_body_over_4mib(tc):
    """A transaction over 4 MiB: 413 (RequestTooLargeError)."""
    blob = os.urandom(60 * 1024)
    ops = [("create", dict({"PartitionKey": "p", "RowKey": str(i)},
                           **{"b%d" % k: blob for k in range(12)}))
           for i in range(6)]
    with pytest.raises((RequestTooLargeError, HttpResponseError)) as ei:
        tc.submit_transaction(ops)
    assert ei.value.status_code == 413
    assert keys_of(tc) == []


# ------------------------------------------------------------ raw HTTP
def test_raw_response_layout(cluster, tc):
    """The multipart response: 202, batchresponse_/changesetresponse_
    boundaries, one part per op in order, Content-ID echoed, insert parts
    with Preference-Applied, Location, DataServiceId and 'ETag:' (exact
    case), delete parts without ETag, no JSON in success parts."""
    t = tc.table_name
    tc.create_entity({"PartitionKey": "p", "RowKey": "d"})
    body = changeset([
        ("0", insert_req(cluster, t, {"PartitionKey": "p", "RowKey": "a"})),
        ("1", "PATCH %s HTTP/1.1\nContent-Type: application/json\n\n{\"x\":1}"
         % entity_url(t, "p", "b")),
        (None, "DELETE %s HTTP/1.1\nIf-Match: *\n\n"
         % entity_url(t, "p", "d")),
    ])
    r, rb = raw_batch(cluster, body)
    parts = check_202(r, rb)
    assert [p[0] for p in parts] == [204, 204, 204]
    h0, h1, h2 = parts[0][1], parts[1][1], parts[2][1]
    assert h0["Content-ID"] == "0" and h1["Content-ID"] == "1"
    assert "Content-ID" not in h2
    assert h0["Preference-Applied"] == "return-no-content"
    loc = "http://127.0.0.1:%d/%s/%s(PartitionKey='p',RowKey='a')" % (
        cluster.fe_port, cluster.account, t)
    assert h0["Location"] == loc and h0["DataServiceId"] == loc
    assert h0["DataServiceVersion"] == "3.0;"
    assert h0["X-Content-Type-Options"] == "nosniff"
    assert h0["ETag"] == tc.get_entity("p", "a").metadata["etag"]
    assert h1["ETag"] == tc.get_entity("p", "b").metadata["etag"]
    assert "ETag" not in h2
    text = rb.decode()
    assert text.count("\r\nETag: W/\"datetime'") == 2, text
    assert text.startswith("--batchresponse_")
    assert text.endswith("--\r\n")
    js = js_parse(rb)
    assert [(p["status"], p["error"]) for p in js] == [(204, False)] * 3
    assert js[0]["rowKey"] == "a"
    assert js[0]["etag"] == h0["ETag"]


def test_raw_insert_returns_entity(cluster, tc):
    """An insert without Prefer answers 201 with the entity (odata.etag
    equal to the part's ETag); return-content adds Preference-Applied."""
    t = tc.table_name
    body = changeset([
        (None, insert_req(cluster, t, {"PartitionKey": "p", "RowKey": "1",
                                       "n": 5}, prefer=None)),
        (None, insert_req(cluster, t, {"PartitionKey": "p", "RowKey": "2"},
                          prefer="return-content")),
    ])
    r, rb = raw_batch(cluster, body)
    parts = check_202(r, rb)
    assert [p[0] for p in parts] == [201, 201]
    for st, h, b in parts:
        assert h["Content-Type"].startswith(
            "application/json;odata=minimalmetadata"), h
        doc = json.loads(b)
        assert doc["odata.etag"] == h["ETag"], (doc, h)
        assert doc["odata.metadata"].endswith("$metadata#%s/@Element" % t)
    assert json.loads(parts[0][2])["n"] == 5
    assert "Preference-Applied" not in parts[0][1]
    assert parts[1][1]["Preference-Applied"] == "return-content"


def test_raw_failure_part(cluster, tc):
    """A failure answers 202 with one part: the real status line, the
    failing part's Content-ID, and the JSON error "<index>:<message>"."""
    t = tc.table_name
    tc.create_entity({"PartitionKey": "p", "RowKey": "x"})
    body = changeset([
        ("a", insert_req(cluster, t, {"PartitionKey": "p", "RowKey": "y"})),
        ("b", insert_req(cluster, t, {"PartitionKey": "p", "RowKey": "x"})),
    ])
    r, rb = raw_batch(cluster, body)
    parts = check_202(r, rb)
    assert len(parts) == 1, parts
    st, h, b = parts[0]
    assert st == 409
    assert h["Content-ID"] == "b"
    assert rb.decode().count("HTTP/1.1 409 Conflict\r\n") == 1
    doc = json.loads(b)
    assert doc["odata.error"]["code"] == "EntityAlreadyExists"
    msg = doc["odata.error"]["message"]["value"]
    assert re.match(r"1:The specified entity already exists\.\n"
                    r"RequestId:[0-9a-f-]{36}\nTime:\d{4}-", msg), msg
    assert keys_of(tc) == [("p", "x")]


def test_raw_upsert_before_2011_08_18(cluster, tc):
    """Before 2011-08-18 there is no Insert Or Replace/Merge: a change set
    holding a PUT or MERGE without If-Match fails that operation with the
    single request's 400 MissingRequiredHeader (202, one failure part),
    and nothing is applied."""
    t = tc.table_name
    for verb in ("PUT", "MERGE"):
        upsert = "\n".join([
            "%s http://127.0.0.1:%d/%s/%s HTTP/1.1" % (
                verb, cluster.fe_port, cluster.account,
                entity_url(t, "p", "u")),
            "Content-Type: application/json", "", json.dumps({"a": 1})])
        body = changeset([
            ("a", insert_req(cluster, t, {"PartitionKey": "p",
                                          "RowKey": "y"})),
            ("b", upsert),
        ])
        r, rb = raw_batch(cluster, body, version="2011-03-28")
        parts = check_202(r, rb)
        assert len(parts) == 1, parts
        st, h, b = parts[0]
        assert st == 400
        assert h["Content-ID"] == "b"
        # 2011-03-28 answers AtomPub (JSON came with 2013-08-15): the
        # failure part is the Atom error (test_atom.py).
        assert h["Content-Type"] == "application/xml"
        m = "{http://schemas.microsoft.com/ado/2007/08/dataservices/metadata}"
        doc = ET.fromstring(b)
        assert doc.find(m + "code").text == "MissingRequiredHeader"
        assert doc.find(m + "message").text.startswith("1:")
        assert keys_of(tc) == []
        r, rb = raw_batch(cluster, body, version="2011-08-18")
        assert [p[0] for p in check_202(r, rb)] == [204, 204]
        assert keys_of(tc) == [("p", "u"), ("p", "y")]
        tc.delete_entity("p", "u")
        tc.delete_entity("p", "y")


def test_raw_lf_only(cluster, tc):
    """A batch with bare LF line ends is accepted."""
    t = tc.table_name
    body = changeset([
        (str(i), insert_req(cluster, t, {"PartitionKey": "p",
                                         "RowKey": str(i)}))
        for i in range(3)], eol="\n")
    assert "\r" not in body
    r, rb = raw_batch(cluster, body)
    parts = check_202(r, rb)
    assert [p[0] for p in parts] == [204] * 3
    assert keys_of(tc) == [("p", "0"), ("p", "1"), ("p", "2")]


def test_raw_relative_urls(cluster, tc):
    """Inner URLs relative to the service root, as absolute paths with the
    account, and with SAS parameters (ignored) all address the table."""
    t = tc.table_name
    acct = cluster.account
    body = changeset([
        (None, insert_req(cluster, t, {"PartitionKey": "p", "RowKey": "1"},
                          absolute=False)),
        (None, "PUT /%s/%s HTTP/1.1\nContent-Type: application/json\n\n{}"
         % (acct, entity_url(t, "p", "2"))),
        (None, "MERGE %s?sv=2019-02-02&sig=abc HTTP/1.1\n\n{\"m\":1}"
         % entity_url(t, "p", "3")),
        (None, "PATCH /%s HTTP/1.1\n\n{}" % entity_url(t, "p", "4")),
    ])
    r, rb = raw_batch(cluster, body)
    parts = check_202(r, rb)
    assert [p[0] for p in parts] == [204] * 4
    assert keys_of(tc) == [("p", str(i)) for i in range(1, 5)]


def test_raw_js_sdk_shape(cluster, tc):
    """The JS SDK's request shape (lower-case part headers, blank line
    after the changeset header, an extra blank line before each body, no
    Content-ID) and its regex parse of our answer."""
    t = tc.table_name
    base = "http://127.0.0.1:%d/%s/" % (cluster.fe_port, cluster.account)
    tc.create_entity({"PartitionKey": "p", "RowKey": "6"})
    body = (
        "--batch_js\r\n"
        "content-type: multipart/mixed; boundary=changeset_js\r\n\r\n\r\n"
        "--changeset_js\r\ncontent-type: application/http\r\n"
        "content-transfer-encoding: binary\r\n\r\n"
        "POST %s%s HTTP/1.1\r\nContent-Type: application/json;odata="
        "nometadata\r\nAccept: application/json;odata=minimalmetadata\r\n"
        "DataServiceVersion: 3.0\r\nPrefer: return-no-content\r\n\r\n\r\n"
        "{\"PartitionKey\":\"p\",\"RowKey\":\"o'k x\",\"Age\":23}\r\n"
        "--changeset_js\r\ncontent-type: application/http\r\n"
        "content-transfer-encoding: binary\r\n\r\n"
        "DELETE %s%s HTTP/1.1\r\nAccept: application/json;odata="
        "minimalmetadata\r\nDataServiceVersion: 3.0\r\nIf-Match: *\r\n"
        "\r\n\r\n"
        "--changeset_js--\r\n--batch_js--\r\n"
        % (base, t, base, entity_url(t, "p", "6").replace(" ", "%20")))
    r, rb = raw_batch(cluster, body, boundary="batch_js")
    check_202(r, rb)
    js = js_parse(rb)
    assert [(p["status"], p["error"]) for p in js] == \
        [(204, False), (204, False)], rb
    assert js[0]["etag"] == tc.get_entity("p", "o'k x").metadata["etag"]
    assert js[1]["etag"] is None
    assert keys_of(tc) == [("p", "o'k x")]


def test_raw_single_get(cluster, tc):
    """A batch holding one GET: 202 with a 200 part directly in the batch
    (no changeset), ETag and the entity JSON."""
    t = tc.table_name
    e = tc.create_entity({"PartitionKey": "p", "RowKey": "g", "n": 7})
    body = ("--batch_raw\r\nContent-Type: application/http\r\n"
            "Content-Transfer-Encoding: binary\r\n\r\n"
            "GET http://127.0.0.1:%d/%s/%s HTTP/1.1\r\n"
            "Accept: application/json;odata=minimalmetadata\r\n\r\n\r\n"
            "--batch_raw--\r\n"
            % (cluster.fe_port, cluster.account, entity_url(t, "p", "g")))
    r, rb = raw_batch(cluster, body)
    parts = check_202(r, rb)
    assert "changesetresponse_" not in rb.decode()
    assert len(parts) == 1
    st, h, b = parts[0]
    assert st == 200
    assert h["ETag"] == e["etag"]
    assert h["Content-Type"].startswith(
        "application/json;odata=minimalmetadata")
    doc = json.loads(b)
    assert doc["n"] == 7 and doc["RowKey"] == "g"
    # A missing entity: the 404 part.
    body = body.replace("RowKey='g'", "RowKey='nope'")
    r, rb = raw_batch(cluster, body)
    parts = check_202(r, rb)
    assert parts[0][0] == 404
    assert json.loads(parts[0][2])["odata.error"]["code"] == \
        "ResourceNotFound"


@pytest.mark.parametrize("what,ct,body", [
    ("not multipart", "application/json", "{}"),
    ("no boundary", "multipart/mixed", "--batch_raw\r\n--batch_raw--\r\n"),
    ("empty body", None, ""),
    ("garbage", None, "\x00\xffnot a batch at all\r\n--\r\n"),
    ("truncated", None,
     "--batch_raw\r\nContent-Type: multipart/mixed; boundary=cs\r\n\r\n"
     "--cs\r\nContent-Type: application/http\r\n\r\n"
     "DELETE t(PartitionKey='p',RowKey='1') HTTP/1.1\r\nIf-Ma"),
    ("two changesets", None,
     "--batch_raw\r\nContent-Type: multipart/mixed; boundary=c1\r\n\r\n"
     "--c1\r\nContent-Type: application/http\r\n\r\n"
     "DELETE t(PartitionKey='p',RowKey='1') HTTP/1.1\r\nIf-Match: *\r\n\r\n"
     "\r\n--c1--\r\n"
     "--batch_raw\r\nContent-Type: multipart/mixed; boundary=c2\r\n\r\n"
     "--c2\r\nContent-Type: application/http\r\n\r\n"
     "DELETE t(PartitionKey='p',RowKey='2') HTTP/1.1\r\nIf-Match: *\r\n\r\n"
     "\r\n--c2--\r\n--batch_raw--\r\n"),
    ("GET mixed with writes", None,
     "--batch_raw\r\nContent-Type: application/http\r\n\r\n"
     "GET t(PartitionKey='p',RowKey='1') HTTP/1.1\r\n\r\n\r\n"
     "--batch_raw\r\nContent-Type: multipart/mixed; boundary=c1\r\n\r\n"
     "--c1\r\nContent-Type: application/http\r\n\r\n"
     "DELETE t(PartitionKey='p',RowKey='2') HTTP/1.1\r\nIf-Match: *\r\n\r\n"
     "\r\n--c1--\r\n--batch_raw--\r\n"),
    ("bad request line", None,
     "--batch_raw\r\nContent-Type: multipart/mixed; boundary=cs\r\n\r\n"
     "--cs\r\nContent-Type: application/http\r\n\r\n"
     "DELETE\r\n\r\n--cs--\r\n--batch_raw--\r\n"),
])
def test_raw_malformed(cluster, what, ct, body):
    """Malformed batches get a plain 400 InvalidInput (not 202), with the
    error code header and JSON body."""
    r, rb = raw_batch(cluster, body, content_type=ct)
    check_error(r, rb, 400, "InvalidInput")


def test_raw_ops_in_part_errors(cluster, tc):
    """Rules an operation breaks in the raw form: DELETE without If-Match
    (400 MissingRequiredHeader), a GET inside a changeset (400), an insert
    without RowKey (400 PropertiesNeedValue), each at its index."""
    t = tc.table_name
    ok = insert_req(cluster, t, {"PartitionKey": "p", "RowKey": "ok"})
    cases = [
        ("DELETE %s HTTP/1.1\n\n" % entity_url(t, "p", "x"),
         400, "MissingRequiredHeader"),
        ("GET %s HTTP/1.1\n\n" % entity_url(t, "p", "x"), 400,
         "InvalidInput"),
        (insert_req(cluster, t, {"PartitionKey": "p"}), 400,
         "PropertiesNeedValue"),
        ("DELETE %s HTTP/1.1\nIf-Match: W/\"datetime'2024-05-01T10%%3A11%%3A"
         "12.3456789Z'\"\n\n" % entity_url(t, "p", "ok"), 400,
         "InvalidDuplicateRow"),
    ]
    for req, status, code in cases:
        r, rb = raw_batch(cluster, changeset([("c0", ok), ("c1", req)]))
        parts = check_202(r, rb)
        assert len(parts) == 1, (code, parts)
        st, h, b = parts[0]
        assert (st, h.get("Content-ID")) == (status, "c1"), (code, rb)
        err = json.loads(b)["odata.error"]
        assert err["code"] == code, (code, err)
        assert err["message"]["value"].startswith("1:"), err
    assert keys_of(tc) == []


def test_raw_auth_and_verbs(cluster, tc):
    """An unsigned batch is refused (401); GET on $batch is 405; the
    cluster still serves afterwards."""
    body = changeset([(None, insert_req(cluster, tc.table_name,
                                        {"PartitionKey": "p",
                                         "RowKey": "1"}))])
    r, rb = raw_batch(cluster, body, sign=False)
    check_error(r, rb, 401, "NoAuthenticationInformation")
    r, rb = raw_batch(cluster, "", verb="GET")
    assert r.status == 405, (r.status, rb)
    assert keys_of(tc) == []
    tc.submit_transaction([("create", {"PartitionKey": "p",
                                       "RowKey": "after"})])
    assert keys_of(tc) == [("p", "after")]


# ------------------------------------------------------------ JS SDK
def _js_sdk_dir(cluster):
    # test_sdk_js.py installs the SDK into <build>/js.
    cands = [os.environ.get("RT_JS_SDK_DIR"),
             os.path.join(cluster.build_dir, "js")]
    for d in cands:
        if d and os.path.isdir(os.path.join(d, "node_modules", "@azure",
                                            "data-tables")):
            return d
    return None


JS_SCRIPT = r"""
const { TableClient, AzureNamedKeyCredential } = require("@azure/data-tables");
const [endpoint, account, key, table] = process.argv.slice(2);
(async () => {
  const tc = new TableClient(endpoint, table,
    new AzureNamedKeyCredential(account, key), {allowInsecureConnection: true});
  const out = {};
  let r = await tc.submitTransaction([
    ["create", {partitionKey: "p", rowKey: "1", n: 1}],
    ["create", {partitionKey: "p", rowKey: "o'k x", n: 2}],
    ["upsert", {partitionKey: "p", rowKey: "3", n: 3}, "Replace"],
    ["upsert", {partitionKey: "p", rowKey: "4", n: 4}, "Merge"],
  ]);
  out.first = r.subResponses.map(s => [s.status, !!s.etag]);
  const e1 = await tc.getEntity("p", "1");
  out.etagMatches = r.subResponses[0].etag === e1.etag;
  r = await tc.submitTransaction([
    ["update", {partitionKey: "p", rowKey: "1", n: 10}, "Merge",
     {etag: e1.etag}],
    ["update", {partitionKey: "p", rowKey: "3", n: 30}, "Replace"],
    ["delete", {partitionKey: "p", rowKey: "4"}],
  ]);
  out.second = r.subResponses.map(s => [s.status, !!s.etag]);
  try {
    await tc.submitTransaction([
      ["create", {partitionKey: "p", rowKey: "new"}],
      ["update", {partitionKey: "p", rowKey: "1", n: 0}, "Merge",
       {etag: e1.etag}]]);
    out.error = null;
  } catch (e) {
    out.error = [e.statusCode, e.code, String(e.message).split("\n")[0]];
  }
  out.rows = [];
  for await (const e of tc.listEntities()) out.rows.push([e.rowKey, e.n]);
  console.log(JSON.stringify(out));
})().catch(e => { console.error(e); process.exit(1); });
"""


def test_js_sdk_transaction(cluster, tc, tmp_path):
    """@azure/data-tables submitTransaction: successes with ETags, a 412 at
    index 1 surfaced as RestError, nothing applied by the failed one."""
    d = _js_sdk_dir(cluster)
    if d is None or not shutil.which("node"):
        pytest.skip("JS SDK not installed (set RT_JS_SDK_DIR)")
    script = os.path.join(d, "rt_batch_test_%s.js" % uuid.uuid4().hex[:8])
    with open(script, "w") as f:
        f.write(JS_SCRIPT)
    try:
        r = subprocess.run(["node", script, cluster.table_endpoint,
                            cluster.account, cluster.key, tc.table_name],
                           capture_output=True, text=True, timeout=120,
                           cwd=d)
    finally:
        os.unlink(script)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["first"] == [[204, True]] * 4, out
    assert out["etagMatches"] is True, out
    assert out["second"] == [[204, True], [204, True], [204, False]], out
    assert out["error"][0] == 412, out
    assert out["error"][1] == "UpdateConditionNotSatisfied", out
    assert out["error"][2].startswith("1:"), out
    assert sorted(out["rows"]) == [["1", 10], ["3", 30], ["o'k x", 2]], out


def test_cluster_healthy_after(cluster, svc):
    """After all of the above the cluster still serves ordinary requests
    (the fixture then checks for sanitizer reports)."""
    names = [t.name for t in svc.list_tables()]
    assert isinstance(names, list)
    with pytest.raises(ResourceNotFoundError):
        svc.get_table_client("nosuch%s" % uuid.uuid4().hex[:6]).get_entity(
            "p", "r")
