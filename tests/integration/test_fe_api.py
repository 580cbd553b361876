"""Front end REST API: $filter/$select/$top on entities and tables,
addressing (host-style, path-style, -secondary), accounts from a file with
two keys, x-ms-version gates, Prefer/Location/ETag headers, If-Match rules,
`timeout`, continuation-token tolerance, key and size validation, formats
and metadata shapes, X-HTTP-Method errors, and TableBeingDeleted.

The Python SDK (azure.data.tables) drives what it can; raw HTTP (signed here
with SharedKey, docs/table-api-spec.md §7) checks the headers, status codes
and error codes the SDK hides. Expectations come from the spec and from the
choices documented in frontend/DESIGN-api.md.
"""

import base64
import datetime
import email.utils
import hashlib
import hmac
import http.client
import json
import os
import sys
import urllib.parse
import uuid

import pytest
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.data.tables import EdmType, EntityProperty

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rtcluster import DEV_ACCOUNT, DEV_KEY, Cluster  # noqa: E402

VERSION = "2019-02-02"
JSON_MIN = "application/json;odata=minimalmetadata"
JSON_NONE = "application/json;odata=nometadata"
JSON_FULL = "application/json;odata=fullmetadata"


# ------------------------------------------------------------ raw HTTP
def http_date():
    return email.utils.format_datetime(
        datetime.datetime.now(datetime.timezone.utc), usegmt=True)


def canonical_resource(account, target):
    path, _, query = target.partition("?")
    res = "/" + account + path
    for k, v in urllib.parse.parse_qsl(query, keep_blank_values=True):
        if k == "comp":
            res += "?comp=" + v
    return res


class Resp:
    def __init__(self, r):
        self.status = r.status
        self.headers = {k.lower(): v for k, v in r.getheaders()}
        self.all_headers = r.getheaders()
        self.raw = r.read()

    def header(self, name):
        return self.headers.get(name.lower())

    def json(self):
        return json.loads(self.raw)

    @property
    def code(self):
        return self.header("x-ms-error-code")

    def __repr__(self):
        return "<%d %s %r>" % (self.status, self.code, self.raw[:300])


def raw(cluster, verb, target, body=None, headers=None, version=VERSION,
        account=DEV_ACCOUNT, key=DEV_KEY, sign_target=None, auth=True):
    """One SharedKey-signed request to the front end. @target is the raw
    request target as sent; the signature covers @sign_target (default:
    @target), so host-style requests pass the path without the account."""
    h = {"x-ms-date": http_date(), "Accept": JSON_MIN,
         "DataServiceVersion": "3.0", "MaxDataServiceVersion": "3.0;NetFx"}
    if version:
        h["x-ms-version"] = version
    data = None
    if body is not None:
        data = body if isinstance(body, bytes) else \
            json.dumps(body).encode()
        h["Content-Type"] = "application/json"
    for k, v in (headers or {}).items():
        if v is None:
            h.pop(k, None)
        else:
            h[k] = v
    if auth:
        sts = "\n".join([verb, "", h.get("Content-Type", ""), h["x-ms-date"],
                         canonical_resource(account, sign_target or target)])
        mac = hmac.new(base64.b64decode(key), sts.encode(), hashlib.sha256)
        h["Authorization"] = "SharedKey %s:%s" % (
            account, base64.b64encode(mac.digest()).decode())
    conn = http.client.HTTPConnection("127.0.0.1", cluster.fe_port,
                                      timeout=30)
    try:
        conn.request(verb, target, body=data, headers=h)
        return Resp(conn.getresponse())
    finally:
        conn.close()


def P(rest):
    """Path-style target for the dev account."""
    return "/" + DEV_ACCOUNT + rest


def ekey(table, pk, rk):
    q = lambda s: urllib.parse.quote(s.replace("'", "''"), safe="")  # noqa
    return P("/%s(PartitionKey='%s',RowKey='%s')" % (table, q(pk), q(rk)))


def make_table(cluster, name):
    r = raw(cluster, "POST", P("/Tables"), {"TableName": name})
    assert r.status == 201, r
    return name


def insert(cluster, table, entity, **kw):
    r = raw(cluster, "POST", P("/" + table), entity, **kw)
    assert r.status in (201, 204), r
    return r


@pytest.fixture(scope="module")
def svc(cluster):
    return cluster.table_service_client()


@pytest.fixture(scope="module")
def people(cluster, svc):
    """A table with 60 entities over 12 PartitionKeys."""
    t = svc.create_table("feapipeople")
    for i in range(60):
        t.create_entity({"PartitionKey": "p%02d" % (i % 12),
                         "RowKey": "r%03d" % i, "n": i, "s": "v%d" % i,
                         "big": EntityProperty(i * 10 ** 10, EdmType.INT64),
                         "flag": i % 2 == 0,
                         "ratio": i / 4})
    return t


# ------------------------------------------------------------ $filter
def test_filter_pk_eq(people):
    """PartitionKey eq returns that partition only, in RowKey order."""
    got = list(people.query_entities("PartitionKey eq 'p03'"))
    assert [e["RowKey"] for e in got] == ["r003", "r015", "r027", "r039",
                                         "r051"]


def test_filter_properties_and_types(people):
    """Comparisons on Int32, Int64 (L literal), Double, Boolean, String."""
    assert len(list(people.query_entities("n ge 10 and n lt 20"))) == 10
    assert len(list(people.query_entities(
        "big gt 500000000000L"))) == 9
    assert len(list(people.query_entities("ratio le 2.5"))) == 11
    assert len(list(people.query_entities("flag eq true"))) == 30
    assert len(list(people.query_entities("flag"))) == 30
    assert len(list(people.query_entities("not flag and n lt 10"))) == 5
    assert [e["n"] for e in people.query_entities("s eq 'v7'")] == [7]
    # Cross-type comparison is false, not an error (spec §6.2).
    assert list(people.query_entities("n eq 'x'")) == []


def test_filter_parameters(people):
    """The SDK's @name substitution produces literals we parse."""
    got = list(people.query_entities(
        "PartitionKey eq @pk and n gt @n",
        parameters={"pk": "p01", "n": 20}))
    assert [e["n"] for e in got] == [25, 37, 49]


def test_filter_key_range(people):
    """A PartitionKey range and a RowKey range inside one partition."""
    got = list(people.query_entities(
        "PartitionKey ge 'p05' and PartitionKey lt 'p07'"))
    assert len(got) == 10
    assert {e["PartitionKey"] for e in got} == {"p05", "p06"}
    got = list(people.query_entities(
        "PartitionKey eq 'p00' and RowKey gt 'r012' and RowKey le 'r036'"))
    assert [e["RowKey"] for e in got] == ["r024", "r036"]
    # Contradictory bounds: nothing, and no error.
    assert list(people.query_entities(
        "PartitionKey eq 'p00' and PartitionKey eq 'p01'")) == []


def test_filter_paged(people):
    """A filter with small pages: every match exactly once, in order."""
    seen = []
    pages = people.query_entities("n ge 5 and n lt 47",
                                  results_per_page=4).by_page()
    for page in pages:
        seen += [e["n"] for e in page]
    assert sorted(seen) == list(range(5, 47))
    assert len(seen) == len(set(seen))


@pytest.mark.parametrize("text", [
    "n eqq 3", "n eq", "(n eq 1", "startswith(s, 'a')", "n eq null",
    "n add 1 eq 2", "n eq 2147483648", "a eq b", "1 eq 1",
    " or ".join("n eq %d" % i for i in range(16)),
])
def test_filter_invalid(cluster, people, text):
    """Bad filters: 400 InvalidInput with the parser's message."""
    r = raw(cluster, "GET", P("/feapipeople()?$filter=" +
                              urllib.parse.quote(text)))
    assert r.status == 400, r
    assert r.code == "InvalidInput"
    msg = r.json()["odata.error"]["message"]["value"]
    assert "RequestId:" in msg and len(msg.split("\n")[0]) > 5


def test_filter_invalid_before_table_lookup(cluster):
    """The filter is checked before any RPC: a bad filter on a missing
    table is 400, a good one is 404 TableNotFound."""
    r = raw(cluster, "GET", P("/nosuchtbl()?$filter=n%20eqq%201"))
    assert (r.status, r.code) == (400, "InvalidInput")
    r = raw(cluster, "GET", P("/nosuchtbl()?$filter=n%20eq%201"))
    assert (r.status, r.code) == (404, "TableNotFound")
    r = raw(cluster, "GET", P("/nosuchtbl()?$filter=PartitionKey%20eq%20'a'"
                              "%20and%20PartitionKey%20eq%20'b'"))
    assert (r.status, r.code) == (404, "TableNotFound")


def test_filter_plus_as_space(cluster, people):
    """'+' in the query string is a space (form encoding)."""
    r = raw(cluster, "GET", P("/feapipeople()?$filter=n+eq+7"))
    assert r.status == 200, r
    assert [e["n"] for e in r.json()["value"]] == [7]


# ------------------------------------------------------------ $select, $top
def test_select(people):
    """$select: servers project; PK/RK/Timestamp only when listed."""
    got = list(people.query_entities("n eq 3", select=["n", "s"]))
    assert len(got) == 1
    assert dict(got[0]) == {"n": 3, "s": "v3"}
    got = list(people.query_entities("n eq 3",
                                     select=["PartitionKey", "missing"]))
    assert dict(got[0]) == {"PartitionKey": "p03"}


def test_select_get_entity(people):
    e = people.get_entity("p03", "r003", select=["s", "RowKey"])
    assert dict(e) == {"s": "v3", "RowKey": "r003"}


def test_select_odata_etag_kept(cluster, people):
    r = raw(cluster, "GET", P("/feapipeople()?$filter=n%20eq%203&"
                              "$select=n"))
    v = r.json()["value"][0]
    assert v["n"] == 3 and "odata.etag" in v and "PartitionKey" not in v


@pytest.mark.parametrize("top,status,n", [
    ("5", 200, 5), ("1", 200, 1), ("1000", 200, 60), ("5000", 200, 60),
    ("0", 200, 0), ("-1", 400, None), ("x", 400, None), ("", 400, None),
])
def test_top(cluster, people, top, status, n):
    """$top: 0..1000, larger values clamped; 0 is an empty, final page (as
    Azure answers it); others 400."""
    r = raw(cluster, "GET", P("/feapipeople()?$top=" + top))
    assert r.status == status, r
    if status == 200:
        assert len(r.json()["value"]) == n
        assert (r.header("x-ms-continuation-NextPartitionKey") is None) == \
            (n in (0, 60))
    else:
        assert r.code == "InvalidQueryParameterValue"


# ------------------------------------------------------------ continuation
def _next(r):
    return (r.header("x-ms-continuation-NextPartitionKey"),
            r.header("x-ms-continuation-NextRowKey"))


def test_continuation_round_trip(cluster, people):
    """Both headers always together; following them reads everything."""
    target = P("/feapipeople()?$top=7")
    seen = []
    r = raw(cluster, "GET", target)
    while True:
        assert r.status == 200, r
        seen += [(e["PartitionKey"], e["RowKey"]) for e in r.json()["value"]]
        npk, nrk = _next(r)
        assert (npk is None) == (nrk is None)
        if npk is None:
            break
        r = raw(cluster, "GET", target + "&NextPartitionKey=%s&NextRowKey=%s"
                % (urllib.parse.quote(npk), urllib.parse.quote(nrk)))
    assert len(seen) == 60 and seen == sorted(seen)


def test_continuation_lenient(cluster, people):
    """NextPartitionKey alone or with an empty NextRowKey starts at the
    partition's first row; a token we cannot decode is 400 InvalidInput."""
    r = raw(cluster, "GET", P("/feapipeople()?$top=2"))
    npk, _ = _next(r)
    for extra in ("", "&NextRowKey="):
        r2 = raw(cluster, "GET", P("/feapipeople()?$top=100&NextPartitionKey="
                                   + urllib.parse.quote(npk) + extra))
        assert r2.status == 200, r2
        assert r2.json()["value"][0]["RowKey"] == "r000"
    r = raw(cluster, "GET", P("/feapipeople()?NextPartitionKey=%25%25bad"))
    assert (r.status, r.code) == (400, "InvalidInput")


# ------------------------------------------------------------ Query Tables
def test_query_tables_filter(cluster, svc):
    names = ["feqtAlpha", "feqtBeta", "feqtGamma", "feqtdelta"]
    for n in names:
        svc.create_table(n)
    got = [t.name for t in svc.query_tables("TableName eq 'feqtBeta'")]
    assert got == ["feqtBeta"]
    got = [t.name for t in svc.query_tables(
        "TableName ge 'feqt' and TableName lt 'fequ' and "
        "TableName ne 'feqtGamma'")]
    assert sorted(got) == sorted(["feqtAlpha", "feqtBeta", "feqtdelta"])
    got = [t.name for t in svc.query_tables(
        "TableName eq 'feqtAlpha' or TableName eq 'feqtdelta'")]
    assert sorted(got) == ["feqtAlpha", "feqtdelta"]
    # Ordinal, case-sensitive comparison on the name as created.
    got = [t.name for t in svc.query_tables("TableName eq 'feqtalpha'")]
    assert got == []


def test_query_tables_filter_paged(cluster, svc):
    """$top + NextTableName with a filter: all matches exactly once."""
    for i in range(7):
        svc.create_table("fepg%d" % i)
    seen = []
    for page in svc.query_tables("TableName ge 'fepg' and TableName lt "
                                 "'fepz'", results_per_page=3).by_page():
        seen += [t.name for t in page]
    assert sorted(seen) == ["fepg%d" % i for i in range(7)]


def test_query_tables_bad_filter(cluster):
    r = raw(cluster, "GET", P("/Tables?$filter=TableName%20eqq%20'x'"))
    assert (r.status, r.code) == (400, "InvalidInput")


def test_query_tables_fullmetadata(cluster, svc):
    svc.create_table("fefullmeta")
    r = raw(cluster, "GET", P("/Tables?$filter=TableName%20eq%20"
                              "'fefullmeta'"), headers={"Accept": JSON_FULL})
    assert r.status == 200, r
    body = r.json()
    root = "http://127.0.0.1:%d/%s" % (cluster.fe_port, DEV_ACCOUNT)
    assert body["odata.metadata"] == root + "/$metadata#Tables"
    assert body["value"] == [{
        "odata.type": DEV_ACCOUNT + ".Tables",
        "odata.id": root + "/Tables('fefullmeta')",
        "odata.editLink": "Tables('fefullmeta')",
        "TableName": "fefullmeta"}]
    assert r.header("Content-Type").startswith(JSON_FULL)
    r = raw(cluster, "GET", P("/Tables?$filter=TableName%20eq%20"
                              "'fefullmeta'"), headers={"Accept": JSON_NONE})
    assert r.json() == {"value": [{"TableName": "fefullmeta"}]}


# ------------------------------------------------------------ addressing
def test_host_style(cluster):
    """Host {account}.table.<domain>: the path holds no account; signed as
    "/" + account + path; the root URL has no account segment."""
    host = "%s.table.rt.test:%d" % (DEV_ACCOUNT, cluster.fe_port)
    make_table(cluster, "fehoststyle")
    r = raw(cluster, "GET", "/Tables?$filter=TableName%20eq%20'fehoststyle'",
            headers={"Host": host})
    assert r.status == 200, r
    assert r.json()["odata.metadata"] == "http://%s/$metadata#Tables" % host
    r = raw(cluster, "POST", "/fehoststyle",
            {"PartitionKey": "a", "RowKey": "b"}, headers={"Host": host})
    assert r.status == 201, r
    assert r.header("Location") == \
        "http://%s/fehoststyle(PartitionKey='a',RowKey='b')" % host
    r = raw(cluster, "GET", "/fehoststyle(PartitionKey='a',RowKey='b')",
            headers={"Host": host, "Accept": JSON_FULL})
    assert r.status == 200, r
    assert r.json()["odata.id"] == \
        "http://%s/fehoststyle(PartitionKey='a',RowKey='b')" % host


def test_host_style_secondary(cluster):
    """{account}-secondary host: reads work, writes are 403."""
    host = "%s-secondary.table.rt.test" % DEV_ACCOUNT
    make_table(cluster, "fesecondary")
    r = raw(cluster, "GET", "/fesecondary()", headers={"Host": host})
    assert r.status == 200, r
    r = raw(cluster, "POST", "/fesecondary",
            {"PartitionKey": "a", "RowKey": "b"}, headers={"Host": host})
    assert (r.status, r.code) == (403, "AuthorizationFailure")


def test_path_style_secondary_sdk(cluster, svc):
    """The SDK reading through the path-style -secondary endpoint."""
    from azure.data.tables import TableClient
    t = svc.create_table("fesecsdk")
    t.create_entity({"PartitionKey": "a", "RowKey": "b", "x": 1})
    sec = TableClient(
        endpoint=cluster.table_endpoint.replace(
            DEV_ACCOUNT, DEV_ACCOUNT + "-secondary"),
        table_name="fesecsdk",
        credential=__import__("azure.core.credentials",
                              fromlist=["x"]).AzureNamedKeyCredential(
            DEV_ACCOUNT, DEV_KEY))
    assert sec.get_entity("a", "b")["x"] == 1
    with pytest.raises(HttpResponseError) as ei:
        sec.create_entity({"PartitionKey": "a", "RowKey": "c"})
    assert ei.value.status_code == 403


def test_path_style_through_dns_name(cluster):
    """A dotted Host whose first label is not an account: the first path
    segment is the account (path-style through a DNS name)."""
    host = "rangetable.example.test:%d" % cluster.fe_port
    r = raw(cluster, "GET", P("/Tables"), headers={"Host": host})
    assert r.status == 200, r
    assert r.json()["odata.metadata"] == \
        "http://%s/%s/$metadata#Tables" % (host, DEV_ACCOUNT)
    # Even when the first label is the account: a path that is no
    # host-style resource falls back to path-style.
    host = "%s.table.rt.test" % DEV_ACCOUNT
    r = raw(cluster, "GET", P("/Tables"), headers={"Host": host})
    assert r.status == 200, r
    assert r.json()["odata.metadata"] == \
        "http://%s/%s/$metadata#Tables" % (host, DEV_ACCOUNT)


def test_host_style_unknown_account(cluster):
    r = raw(cluster, "GET", "/Tables",
            headers={"Host": "nosuchacct.table.rt.test"},
            account="nosuchacct")
    assert (r.status, r.code) == (403, "AuthenticationFailed")


# ------------------------------------------------------------ versions
@pytest.mark.parametrize("v,status", [
    ("2009-04-14", 200), ("2015-12-11", 200), ("2030-01-01", 200),
    ("2008-12-31", 400), ("2019-2-02", 400), ("latest", 400),
    ("2019-13-01", 400),
])
def test_version_syntax(cluster, v, status):
    r = raw(cluster, "GET", P("/Tables"), version=v,
            headers={"Accept": "*/*"})
    assert r.status == status, r
    if status == 400:
        assert r.code == "InvalidHeaderValue"
    else:
        assert r.header("x-ms-version") == v


def test_version_gates(cluster):
    make_table(cluster, "fevgates")
    ent = {"PartitionKey": "a", "RowKey": "b"}
    # JSON explicitly requested before 2013-08-15.
    r = raw(cluster, "GET", P("/fevgates()"), version="2012-02-12")
    assert (r.status, r.code) == (415, "JsonFormatNotSupported")
    # Nothing asked for: answered in Atom, the default of those versions.
    r = raw(cluster, "GET", P("/fevgates()"), version="2012-02-12",
            headers={"Accept": None})
    assert r.status == 200, r
    assert r.header("Content-Type").startswith("application/atom+xml")
    # Upserts need 2011-08-18.
    r = raw(cluster, "PUT", ekey("fevgates", "a", "b"), ent,
            version="2011-08-17", headers={"Accept": None,
                                           "Content-Type": None})
    assert (r.status, r.code) == (400, "MissingRequiredHeader")
    r = raw(cluster, "PUT", ekey("fevgates", "a", "b"), ent,
            version="2011-08-18", headers={"Accept": None,
                                           "Content-Type": None})
    assert r.status == 204, r
    # $select needs 2011-08-18.
    r = raw(cluster, "GET", P("/fevgates()?$select=x"), version="2009-09-19",
            headers={"Accept": None})
    assert (r.status, r.code) == (400, "InvalidQueryParameterValue")
    # Atom: answered up to 2015-04-05 (test_atom.py), refused from
    # 2015-12-11 on.
    r = raw(cluster, "GET", P("/fevgates()"), version="2013-08-15",
            headers={"Accept": "application/atom+xml"})
    assert r.status == 200, r
    assert r.header("Content-Type").startswith("application/atom+xml")
    for v in ("2015-12-11", "2019-02-02"):
        r = raw(cluster, "GET", P("/fevgates()"), version=v,
                headers={"Accept": "application/atom+xml"})
        assert (r.status, r.code) == (415, "AtomFormatNotSupported")
    # No x-ms-version at all: gates not applied, JSON answered.
    r = raw(cluster, "PUT", ekey("fevgates", "a", "c"), ent, version=None)
    assert r.status == 204, r
    assert r.header("x-ms-version")


def test_prefer_ignored_before_2013(cluster):
    make_table(cluster, "feprefold")
    r = raw(cluster, "POST", P("/feprefold"),
            {"PartitionKey": "a", "RowKey": "b"}, version="2012-02-12",
            headers={"Accept": None, "Content-Type": None,
                     "Prefer": "return-no-content"})
    assert r.status == 201, r
    assert r.header("Preference-Applied") is None


# ------------------------------------------------------------ headers
def test_prefer_create_table(cluster):
    r = raw(cluster, "POST", P("/Tables"), {"TableName": "feprefa"},
            headers={"Prefer": "return-no-content"})
    assert r.status == 204, r
    assert r.header("Preference-Applied") == "return-no-content"
    root = "http://127.0.0.1:%d/%s" % (cluster.fe_port, DEV_ACCOUNT)
    assert r.header("Location") == root + "/Tables('feprefa')"
    assert r.header("DataServiceId") == root + "/Tables('feprefa')"
    assert r.raw == b""
    r = raw(cluster, "POST", P("/Tables"), {"TableName": "feprefb"},
            headers={"Prefer": "return-content"})
    assert r.status == 201, r
    assert r.header("Preference-Applied") == "return-content"
    assert r.json()["TableName"] == "feprefb"
    r = raw(cluster, "POST", P("/Tables"), {"TableName": "feprefc"})
    assert r.status == 201 and r.header("Preference-Applied") is None
    assert r.json() == {"odata.metadata": root + "/$metadata#Tables/@Element",
                        "TableName": "feprefc"}


def test_prefer_insert_and_etags(cluster):
    """Insert: Prefer honoured, Location/DataServiceId, ETag equal to the
    entity's; update/merge/upserts: ETag, no Preference-Applied."""
    make_table(cluster, "feprefent")
    root = "http://127.0.0.1:%d/%s" % (cluster.fe_port, DEV_ACCOUNT)
    r = raw(cluster, "POST", P("/feprefent"),
            {"PartitionKey": "p q", "RowKey": "o'k"},
            headers={"Prefer": "return-no-content"})
    assert r.status == 204 and r.raw == b""
    assert r.header("Preference-Applied") == "return-no-content"
    assert r.header("Location") == \
        root + "/feprefent(PartitionKey='p%20q',RowKey='o%27%27k')"
    assert r.header("DataServiceId") == r.header("Location")
    etag = r.header("ETag")
    g = raw(cluster, "GET", ekey("feprefent", "p q", "o'k"))
    assert g.status == 200 and g.header("ETag") == etag
    assert g.json()["odata.etag"] == etag
    r = raw(cluster, "POST", P("/feprefent"), {"PartitionKey": "a",
                                               "RowKey": "b"})
    assert r.status == 201 and r.header("Preference-Applied") is None
    assert r.json()["odata.etag"] == r.header("ETag")
    for verb, im in (("PUT", "*"), ("MERGE", "*"), ("PATCH", None),
                     ("PUT", None)):
        h = {"Prefer": "return-content"}
        if im:
            h["If-Match"] = im
        r = raw(cluster, verb, ekey("feprefent", "a", "b"), {"x": 1},
                headers=h)
        assert r.status == 204, (verb, r)
        assert r.header("Preference-Applied") is None
        assert r.header("ETag") == \
            raw(cluster, "GET", ekey("feprefent", "a", "b")).header("ETag")


def test_if_match_rules(cluster):
    make_table(cluster, "feifmatch")
    insert(cluster, "feifmatch", {"PartitionKey": "a", "RowKey": "b"})
    k = ekey("feifmatch", "a", "b")
    r = raw(cluster, "PUT", k, {"x": 1}, headers={"If-Match": "bogus"})
    assert (r.status, r.code) == (400, "InvalidInput")
    r = raw(cluster, "PUT", k, {"x": 1}, headers={"If-Match": ""})
    assert (r.status, r.code) == (412, "UpdateConditionNotSatisfied")
    r = raw(cluster, "PUT", k, {"x": 1}, headers={
        "If-Match": "W/\"datetime'2001-01-01T00%3A00%3A00Z'\""})
    assert (r.status, r.code) == (412, "UpdateConditionNotSatisfied")
    r = raw(cluster, "DELETE", k)
    assert (r.status, r.code) == (400, "MissingRequiredHeader")
    etag = raw(cluster, "GET", k).header("ETag")
    # ':' not percent-encoded in If-Match still matches.
    r = raw(cluster, "MERGE", k, {"y": 2},
            headers={"If-Match": etag.replace("%3A", ":")})
    assert r.status == 204, r
    r = raw(cluster, "DELETE", ekey("feifmatch", "a", "zz"),
            headers={"If-Match": "*"})
    assert (r.status, r.code) == (404, "ResourceNotFound")
    r = raw(cluster, "DELETE", k, headers={"If-Match": "*"})
    assert r.status == 204


def test_timeout_param(cluster):
    for t, status in (("5", 200), ("30", 200), ("120", 200), ("0", 400),
                      ("-3", 400), ("abc", 400)):
        r = raw(cluster, "GET", P("/Tables?timeout=" + t))
        assert r.status == status, (t, r)
        if status == 400:
            assert r.code == "InvalidQueryParameterValue"


def test_client_request_id(cluster):
    r = raw(cluster, "GET", P("/Tables"),
            headers={"x-ms-client-request-id": "my id 1"})
    assert r.header("x-ms-client-request-id") == "my id 1"
    r = raw(cluster, "GET", P("/Tables"),
            headers={"x-ms-client-request-id": "a" * 1025})
    assert r.header("x-ms-client-request-id") is None
    r = raw(cluster, "GET", P("/nosuchtable()"),
            headers={"x-ms-client-request-id": "err-1"})
    assert r.status == 404 and r.header("x-ms-client-request-id") == "err-1"


def test_common_headers(cluster):
    r = raw(cluster, "GET", P("/Tables"))
    assert r.header("DataServiceVersion") == "3.0;"
    assert r.header("x-ms-request-id") and r.header("Date")
    assert r.header("x-ms-version") == VERSION
    assert r.header("Cache-Control") == "no-cache"
    assert r.header("X-Content-Type-Options") == "nosniff"
    # DataServiceVersion / MaxDataServiceVersion are read leniently.
    r = raw(cluster, "GET", P("/Tables"), headers={
        "DataServiceVersion": "1.0;NetFx", "MaxDataServiceVersion": "junk"})
    assert r.status == 200, r


# ------------------------------------------------------------ entities
def test_url_keys_win(cluster):
    """PUT/MERGE: the URL's keys win over different keys in the body."""
    make_table(cluster, "feurlwins")
    r = raw(cluster, "PUT", ekey("feurlwins", "url", "key"),
            {"PartitionKey": "body", "RowKey": "other", "v": 1})
    assert r.status == 204, r
    assert raw(cluster, "GET", ekey("feurlwins", "url", "key")).status == 200
    assert raw(cluster, "GET", ekey("feurlwins", "body", "other")).status \
        == 404


def test_key_validation(cluster):
    make_table(cluster, "fekeys")
    # URL keys: bad characters 400 InvalidInput, too long OutOfRangeInput.
    r = raw(cluster, "GET", ekey("fekeys", "a/b", "c"))
    assert (r.status, r.code) == (400, "InvalidInput")
    r = raw(cluster, "DELETE", ekey("fekeys", "a", "c#d"),
            headers={"If-Match": "*"})
    assert (r.status, r.code) == (400, "InvalidInput")
    r = raw(cluster, "GET", ekey("fekeys", "x" * 1025, "c"))
    assert (r.status, r.code) == (400, "OutOfRangeInput")
    # Body keys (insert): OutOfRangeInput.
    for pk, rk in (("a/b", "c"), ("a", "c?d"), ("a\\b", "c"),
                   ("a\tb", "c"), ("x" * 1025, "c")):
        r = raw(cluster, "POST", P("/fekeys"), {"PartitionKey": pk,
                                                "RowKey": rk})
        assert (r.status, r.code) == (400, "OutOfRangeInput"), (pk, rk)
    r = raw(cluster, "POST", P("/fekeys"), {"PartitionKey": "a"})
    assert (r.status, r.code) == (400, "PropertiesNeedValue")
    r = raw(cluster, "POST", P("/fekeys"), {"PartitionKey": 1,
                                            "RowKey": "a"})
    assert (r.status, r.code) == (400, "InvalidInput")
    # Empty keys and 1024 characters are fine.
    insert(cluster, "fekeys", {"PartitionKey": "", "RowKey": ""})
    insert(cluster, "fekeys", {"PartitionKey": "y" * 1024, "RowKey": "r"})


def test_entity_limits(cluster):
    make_table(cluster, "felimits")
    base = {"PartitionKey": "a", "RowKey": "b"}
    cases = [
        (dict(base, s="x" * 32768), "PropertyValueTooLarge"),
        (dict(base, **{"p%d" % i: i for i in range(253)}),
         "TooManyProperties"),
        (dict(base, **{"n" * 256: 1}), "PropertyNameTooLong"),
        (dict(base, **{"bad-name": 1}), "PropertyNameInvalid"),
        (dict(base, **{"b%d" % i: "y" * 30000 for i in range(20)}),
         "EntityTooLarge"),
    ]
    for ent, code in cases:
        r = raw(cluster, "POST", P("/felimits"), ent)
        assert (r.status, r.code) == (400, code), (code, r)
    r = raw(cluster, "POST", P("/felimits"),
            b'{"PartitionKey":"a","RowKey":"b","x":1,"x":2}')
    assert (r.status, r.code) == (400, "DuplicatePropertiesSpecified")
    insert(cluster, "felimits", dict(base, s="x" * 32000,
                                     **{"p%d" % i: i for i in range(250)}))


def test_body_content_types(cluster):
    make_table(cluster, "fectype")
    ent = {"PartitionKey": "a", "RowKey": "b"}
    r = raw(cluster, "POST", P("/fectype"), ent,
            headers={"Content-Type": "application/atom+xml"})
    assert (r.status, r.code) == (415, "AtomFormatNotSupported")
    r = raw(cluster, "POST", P("/fectype"), ent,
            headers={"Content-Type": "application/json;odata=nometadata"})
    assert r.status == 201, r
    r = raw(cluster, "POST", P("/fectype"), b"{not json",
            headers={"Content-Type": "application/json"})
    assert (r.status, r.code) == (400, "InvalidInput")
    # A body on GET is ignored.
    r = raw(cluster, "GET", ekey("fectype", "a", "b"), b"garbage")
    assert r.status == 200, r


def test_format_overrides_accept(cluster):
    make_table(cluster, "feformat")
    insert(cluster, "feformat", {"PartitionKey": "a", "RowKey": "b",
                                 "n": 1})
    root = "http://127.0.0.1:%d/%s" % (cluster.fe_port, DEV_ACCOUNT)
    r = raw(cluster, "GET", ekey("feformat", "a", "b") +
            "?$format=application/json;odata=fullmetadata",
            headers={"Accept": JSON_NONE})
    assert r.status == 200, r
    e = r.json()
    assert r.header("Content-Type").startswith(JSON_FULL)
    assert e["odata.metadata"] == root + "/$metadata#feformat/@Element"
    assert e["odata.type"] == DEV_ACCOUNT + ".feformat"
    assert e["odata.id"] == root + "/feformat(PartitionKey='a',RowKey='b')"
    assert e["odata.editLink"] == "feformat(PartitionKey='a',RowKey='b')"
    assert e["Timestamp@odata.type"] == "Edm.DateTime"
    assert list(e)[:5] == ["odata.metadata", "odata.type", "odata.id",
                           "odata.etag", "odata.editLink"]
    r = raw(cluster, "GET", P("/feformat()?$format=application/json;"
                              "odata=nometadata"))
    assert r.json() == {"value": [{"PartitionKey": "a", "RowKey": "b",
                                   "Timestamp": r.json()["value"][0][
                                       "Timestamp"], "n": 1}]}
    r = raw(cluster, "GET", P("/feformat()?$format=atom"))
    assert (r.status, r.code) == (415, "AtomFormatNotSupported")
    r = raw(cluster, "GET", P("/feformat()?$format=bogus"))
    assert (r.status, r.code) == (400, "InvalidQueryParameterValue")


def test_xhttp_method(cluster):
    make_table(cluster, "fexmethod")
    insert(cluster, "fexmethod", {"PartitionKey": "a", "RowKey": "b"})
    k = ekey("fexmethod", "a", "b")
    r = raw(cluster, "POST", k, {"x": 5},
            headers={"X-HTTP-Method": "MERGE", "If-Match": "*"})
    assert r.status == 204, r
    assert raw(cluster, "GET", k).json()["x"] == 5
    r = raw(cluster, "PUT", k, {"x": 5}, headers={"X-HTTP-Method": "MERGE"})
    assert (r.status, r.code) == (400, "XMethodNotUsingPost")
    r = raw(cluster, "POST", k, {"x": 5}, headers={"X-HTTP-Method": "GET"})
    assert (r.status, r.code) == (400, "XMethodIncorrectValue")
    r = raw(cluster, "POST", k, headers={"X-HTTP-Method": "DELETE",
                                         "If-Match": "*"})
    assert r.status == 204, r


# ------------------------------------------------------------ tables
def test_delete_table_codes(cluster, svc):
    make_table(cluster, "fedeltbl")
    r = raw(cluster, "DELETE", P("/Tables('fedeltbl')"))
    assert r.status == 204 and r.raw == b""
    r = raw(cluster, "DELETE", P("/Tables('fedeltbl')"))
    assert (r.status, r.code) in ((404, "ResourceNotFound"),
                                  (409, "TableBeingDeleted")), r
    # Recreating within the deletion grace period: 409 TableBeingDeleted
    # (Azure's asynchronous delete); a cluster without one creates it.
    r = raw(cluster, "POST", P("/Tables"), {"TableName": "fedeltbl"})
    assert r.status in (201, 409), r
    if r.status == 409:
        assert r.code == "TableBeingDeleted"
        assert "being deleted" in r.json()["odata.error"]["message"]["value"]
    r = raw(cluster, "GET", P("/fedeltbl()"))
    assert r.status in (200, 404)


def test_create_table_errors(cluster):
    make_table(cluster, "fedupe")
    r = raw(cluster, "POST", P("/Tables"), {"TableName": "FEDUPE"})
    assert (r.status, r.code) == (409, "TableAlreadyExists")
    for name, code in (("ab", "OutOfRangeInput"), ("1abc", "InvalidResourceName"),
                       ("Tables", "InvalidResourceName"),
                       ("a-bc", "InvalidResourceName")):
        r = raw(cluster, "POST", P("/Tables"), {"TableName": name})
        assert (r.status, r.code) == (400, code), name
    r = raw(cluster, "POST", P("/Tables"), {"Other": "x"})
    assert (r.status, r.code) == (400, "PropertiesNeedValue")


# ------------------------------------------------------------ accounts
KEY_A1 = base64.b64encode(b"k1" * 32).decode()
KEY_A2 = base64.b64encode(b"k2" * 32).decode()
KEY_B = base64.b64encode(b"kb" * 32).decode()


@pytest.fixture(scope="module")
def acct_cluster(tmp_path_factory):
    """A second cluster whose front end serves two accounts from a file and
    not the development account."""
    wd = tmp_path_factory.mktemp("accounts")
    path = os.path.join(str(wd), "accounts.txt")
    with open(path, "w") as f:
        f.write("# name key1 [key2]\n\nacctone %s %s\n  accttwo %s  \n"
                % (KEY_A1, KEY_A2, KEY_B))
    os.chmod(path, 0o600)  # the front end refuses a file others can read
    c = Cluster(wd, n_ps=1, replication_factor=1)  # one server: one copy
    base_args = c.frontend.args
    c.frontend.args = lambda: base_args() + ["--accounts", path,
                                             "--dev-account", "false"]
    c.start()
    yield c
    c.stop(check=False)
    c.check_sanitizers()


def _acct_client(c, account, key):
    from azure.core.credentials import AzureNamedKeyCredential
    from azure.data.tables import TableServiceClient
    return TableServiceClient(
        endpoint="http://127.0.0.1:%d/%s" % (c.fe_port, account),
        credential=AzureNamedKeyCredential(account, key), retry_total=0)


def test_accounts_file_both_keys(acct_cluster):
    """Either key of an account works (rotation without downtime)."""
    s1 = _acct_client(acct_cluster, "acctone", KEY_A1)
    s1.create_table("rotation")
    s2 = _acct_client(acct_cluster, "acctone", KEY_A2)
    assert [t.name for t in s2.list_tables()] == ["rotation"]
    s2.get_table_client("rotation").create_entity(
        {"PartitionKey": "a", "RowKey": "b"})
    # Accounts are separate namespaces.
    sb = _acct_client(acct_cluster, "accttwo", KEY_B)
    assert list(sb.list_tables()) == []
    sb.create_table("rotation")


def test_accounts_file_rejects(acct_cluster):
    """A key of another account, and the disabled dev account: 403."""
    from azure.core.exceptions import ClientAuthenticationError
    with pytest.raises(ClientAuthenticationError):
        list(_acct_client(acct_cluster, "acctone", KEY_B).list_tables())
    with pytest.raises(ClientAuthenticationError):
        list(_acct_client(acct_cluster, DEV_ACCOUNT, DEV_KEY).list_tables())
    r = raw(acct_cluster, "GET", "/acctone/Tables", account="acctone",
            key=KEY_A2)
    assert r.status == 200, r
    r = raw(acct_cluster, "GET", "/Tables", account="accttwo", key=KEY_B,
            headers={"Host": "accttwo.table.rt.test"})
    assert r.status == 200, r


def test_missing_entity_sdk(people):
    with pytest.raises(ResourceNotFoundError):
        people.get_entity("nope", "nope")
