"""What Azurite's own Table test suite (tests/compat/azurite-suite.sh) found
that real Azure does and rangetable did not, each checked here through the
official Python SDK or, where the SDK cannot express it, raw HTTP
(rawhttp.py):

- a trailing slash after the resource (`POST /account/Tables/`, the
  suite's REST helper) addresses the same resource;
- a bare boolean literal is a filter term (`$filter=true`,
  `... and false`);
- the cluster of README line 1 (deploy/run-local.sh, rt-master
  --delete-grace-ms 0) lets a deleted table's name be created again at once,
  and the new table never shows the old one's entities.

The cluster runs with --delete-grace-ms 0, as deploy/run-local.sh starts it.
"""

import os
import sys

import pytest
from azure.core.exceptions import ResourceNotFoundError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rawhttp  # noqa: E402
from rtcluster import Cluster  # noqa: E402


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """The conftest cluster with run-local.sh's deletion grace (none)."""
    c = Cluster(tmp_path_factory.mktemp("cluster"), n_ps=3,
                extra_args={"master": ["--delete-grace-ms", "0"]})
    sys.stderr.write("\n[rtcluster] logs in %s\n" % c.logdir)
    c.start()
    yield c
    c.stop(check=False)
    c.check_sanitizers()


@pytest.fixture(scope="module")
def svc(cluster):
    return cluster.table_service_client()


@pytest.fixture()
def raw(cluster):
    c = rawhttp.Client(cluster.fe_port)
    yield c
    c.close()


# ------------------------------------------------------------ trailing slash
def test_create_and_query_tables_with_trailing_slash(raw, svc):
    r = raw.post(raw.path("/Tables/"), {"TableName": "slashtable"})
    assert r.status == 201, r
    assert r.json()["TableName"] == "slashtable"
    names = [t.name for t in svc.list_tables()]
    assert "slashtable" in names
    r = raw.get(raw.path("/Tables/"))
    assert r.status == 200, r
    assert "slashtable" in [t["TableName"] for t in r.json()["value"]]
    # The same name again through the slash form: the same resource.
    r = raw.post(raw.path("/Tables/"), {"TableName": "slashtable"})
    assert r.status == 409 and r.error_code == "TableAlreadyExists", r


def test_entity_collection_with_trailing_slash(raw, svc):
    svc.create_table("slashents")
    r = raw.post(raw.path("/slashents/"),
                 {"PartitionKey": "p", "RowKey": "r", "V": 1})
    assert r.status == 201, r
    r = raw.get(raw.path("/slashents/"))
    assert r.status == 200, r
    assert [(e["RowKey"], e["V"]) for e in r.json()["value"]] == [("r", 1)]
    # Two slashes are an extra (empty) segment: still a bad URI.
    r = raw.get(raw.path("/slashents//"))
    assert r.status == 400 and r.error_code == "InvalidUri", r


# ------------------------------------------------------------ boolean terms
@pytest.fixture(scope="module")
def booltable(svc):
    t = svc.create_table("booltable")
    for pk in ("a", "b", "c"):
        for rk in ("1", "2"):
            t.create_entity({"PartitionKey": pk, "RowKey": rk,
                             "Flag": rk == "1"})
    return t


def keys(entities):
    return sorted((e["PartitionKey"], e["RowKey"]) for e in entities)


ALL = [(pk, rk) for pk in ("a", "b", "c") for rk in ("1", "2")]


@pytest.mark.parametrize("flt,want", [
    ("true", ALL),
    ("false", []),
    ("not false", ALL),
    ("RowKey eq '1' and true", [("a", "1"), ("b", "1"), ("c", "1")]),
    ("RowKey eq '1' and false", []),
    ("false or PartitionKey eq 'b'", [("b", "1"), ("b", "2")]),
    ("PartitionKey eq 'b' or true", ALL),
    # Azurite's query test 14, verbatim but for the keys.
    ("(true and RowKey eq '1') and ((false or PartitionKey eq 'a') or "
     "PartitionKey eq 'b') or PartitionKey eq 'c'",
     [("a", "1"), ("b", "1"), ("c", "1"), ("c", "2")]),
    ("Flag and true", [("a", "1"), ("b", "1"), ("c", "1")]),
])
def test_boolean_literal_terms(booltable, flt, want):
    assert keys(booltable.query_entities(flt)) == want


def test_boolean_literal_paged(booltable):
    """A filter that folds to true pages like no filter at all."""
    pages = booltable.query_entities("true", results_per_page=4).by_page()
    sizes = [len(list(p)) for p in pages]
    assert sizes == [4, 2]


def test_boolean_literal_in_query_tables(raw, booltable):
    r = raw.get(raw.path("/Tables?$filter=true"))
    assert r.status == 200, r
    assert "booltable" in [t["TableName"] for t in r.json()["value"]]
    r = raw.get(raw.path("/Tables?$filter=TableName%20eq%20'booltable'"
                         "%20and%20not%20false"))
    assert [t["TableName"] for t in r.json()["value"]] == ["booltable"]
    r = raw.get(raw.path("/Tables?$filter=false"))
    assert r.status == 200 and r.json()["value"] == [], r


def test_literal_alone_still_rejected(raw, booltable):
    r = raw.get(raw.path("/booltable()?$filter=42"))
    assert r.status == 400 and r.error_code == "InvalidInput", r
    r = raw.get(raw.path("/booltable()?$filter=true%20eq%20true"))
    assert r.status == 400 and r.error_code == "InvalidInput", r


# ------------------------------------------------------------ re-create at once
def test_delete_and_recreate_at_once_shows_no_old_data(svc):
    """With no grace period a name is free again as soon as it is deleted;
    the new table is a new table id, so none of the old entities (several
    partitions, a point read included) ever shows through, while the old
    table's ranges are still being dropped on the partition servers."""
    name = "recreated"
    for round_ in range(5):
        t = svc.create_table(name)
        assert list(t.list_entities()) == [], round_
        with pytest.raises(ResourceNotFoundError):
            t.get_entity("p0", "r0")
        for i in range(20):
            t.create_entity({"PartitionKey": "p%d" % (i % 4),
                             "RowKey": "r%d" % i, "Round": round_})
        assert len(list(t.list_entities())) == 20
        assert t.get_entity("p0", "r0")["Round"] == round_
        svc.delete_table(name)
    t = svc.create_table(name)
    assert list(t.query_entities("Round ge 0")) == []
    t.create_entity({"PartitionKey": "p0", "RowKey": "r0", "Round": 99})
    assert [e["Round"] for e in t.list_entities()] == [99]


# ------------------------------------------------------------ weak ETags
@pytest.mark.parametrize("etag", ['W/"wrong"', 'w/"wrong"',
                                  "w/\"datetime'2015-01-01T23%3A14%3A33."
                                  "4980000Z'\""])
def test_any_weak_etag_is_412_not_400(raw, svc, etag):
    """A weak ETag that is not ours, with either case of the weak
    indicator, is well-formed and matches nothing: 412, never 400."""
    t = svc.create_table_if_not_exists("weaketags")
    t.upsert_entity({"PartitionKey": "p", "RowKey": "r", "V": 1})
    path = raw.path(rawhttp.entity_path("weaketags", "p", "r"))
    for verb in ("PUT", "MERGE", "DELETE"):
        body = {"V": 2} if verb != "DELETE" else None
        r = raw.request(verb, path, body=body, headers={"If-Match": etag})
        assert r.status == 412, (verb, r)
        assert r.error_code == "UpdateConditionNotSatisfied", (verb, r)
    assert t.get_entity("p", "r")["V"] == 1
    r = raw.request("MERGE", path, body={"V": 2},
                    headers={"If-Match": '"strong"'})
    assert r.status == 400, r


# ------------------------------------------------------------ EDM edges
def test_typed_null_is_not_stored(raw, svc):
    """"X": null with an Edm type (what @azure/data-tables sends for an
    Invalid Date or Infinity) is accepted and not stored, like an untyped
    null: Azure does not store nulls (azure-storage-net#101)."""
    svc.create_table_if_not_exists("edmedges")
    r = raw.post(raw.path("/edmedges"), {
        "PartitionKey": "p", "RowKey": "null",
        "D": None, "D@odata.type": "Edm.DateTime",
        "X": None, "X@odata.type": "Edm.Double", "Kept": 1})
    assert r.status == 201, r
    e = svc.get_table_client("edmedges").get_entity("p", "null")
    assert "D" not in e and "X" not in e and e["Kept"] == 1


@pytest.mark.parametrize("value,code", [
    # .NET's default(DateTimeOffset): Azure answers OutOfRangeInput
    # (Azurite#1757); Edm.DateTime starts at 1601-01-01.
    ("0001-01-01T00:00:00+00:00", "OutOfRangeInput"),
    ("1600-12-31T23:59:59.9999999Z", "OutOfRangeInput"),
    ("", "InvalidInput"),
])
def test_datetime_out_of_range_rejected(raw, svc, value, code):
    svc.create_table_if_not_exists("edmedges")
    r = raw.post(raw.path("/edmedges"), {
        "PartitionKey": "p", "RowKey": "d", "D": value,
        "D@odata.type": "Edm.DateTime"})
    assert r.status == 400 and r.error_code == code, r


@pytest.mark.parametrize("body", [
    # Azure: 400 InvalidInput for a Double beyond the largest one
    # (Azurite#2387), as text or as a JSON number.
    b'{"PartitionKey":"p","RowKey":"x","X":"13e7705",'
    b'"X@odata.type":"Edm.Double"}',
    b'{"PartitionKey":"p","RowKey":"x","X":1e400,'
    b'"X@odata.type":"Edm.Double"}',
    b'{"PartitionKey":"p","RowKey":"x","X":-1e400}',
])
def test_double_beyond_max_rejected(raw, svc, body):
    svc.create_table_if_not_exists("edmedges")
    r = raw.post(raw.path("/edmedges"), body)
    assert r.status == 400 and r.error_code == "InvalidInput", r


def test_double_max_and_infinity_accepted(raw, svc):
    svc.create_table_if_not_exists("edmedges")
    r = raw.post(raw.path("/edmedges"), {
        "PartitionKey": "p", "RowKey": "max", "X": 1.797693134862315e308,
        "X@odata.type": "Edm.Double", "I": "Infinity",
        "I@odata.type": "Edm.Double"})
    assert r.status == 201, r
    e = svc.get_table_client("edmedges").get_entity("p", "max")
    assert e["X"] == 1.797693134862315e308 and e["I"] == float("inf")


# ------------------------------------------------------------ CORS Vary
CORS_XML = ('<?xml version="1.0" encoding="utf-8"?><StorageServiceProperties>'
            '<Cors><CorsRule><AllowedOrigins>%s</AllowedOrigins>'
            '<AllowedMethods>GET,POST</AllowedMethods>'
            '<AllowedHeaders>header</AllowedHeaders>'
            '<ExposedHeaders>*</ExposedHeaders>'
            '<MaxAgeInSeconds>8888</MaxAgeInSeconds></CorsRule></Cors>'
            '</StorageServiceProperties>')


def set_cors_origin(raw, origin):
    r = raw.put(raw.path("/?restype=service&comp=properties"),
                CORS_XML % origin, content_type="application/xml",
                accept=None)
    assert r.status == 202, r


def test_vary_origin_as_azure_sets_it(raw):
    """Vary: Origin on GET/HEAD when the origin matched a rule naming it or
    matched none while rules exist; not after a "*" rule, not on other
    methods, not without an Origin."""
    props = raw.path("/?restype=service&comp=properties")
    set_cors_origin(raw, "http://exact.example")
    r = raw.get(props, accept=None, headers={"Origin": "http://exact.example"})
    assert r.status == 200, r
    assert r.header("Access-Control-Allow-Origin") == "http://exact.example"
    assert r.header("Vary") == "Origin"
    r = raw.get(props, accept=None, headers={"Origin": "http://other.example"})
    assert r.status == 200
    assert r.header("Access-Control-Allow-Origin") is None
    assert r.header("Vary") == "Origin"
    r = raw.get(props, accept=None)
    assert r.header("Vary") is None
    r = raw.post(raw.path("/Tables"), {"TableName": "varypost"},
                 headers={"Origin": "http://exact.example"})
    assert r.status == 201, r
    assert r.header("Access-Control-Allow-Origin") == "http://exact.example"
    assert r.header("Vary") is None
    set_cors_origin(raw, "*")
    r = raw.get(props, accept=None, headers={"Origin": "http://any.example"})
    assert r.header("Access-Control-Allow-Origin") == "*"
    assert r.header("Access-Control-Expose-Headers")
    assert r.header("Vary") is None
    r = raw.get(props, accept=None)
    assert r.header("Access-Control-Allow-Origin") is None
    assert r.header("Vary") is None


# ------------------------------------------------------------ service stats
def test_service_stats_secondary_only(raw, svc):
    """Get Service Stats is served on the secondary address; the primary
    answers 400 InvalidQueryParameterValue (the SDK asks the secondary)."""
    r = raw.get("/%s/?restype=service&comp=stats" % raw.account, accept=None)
    assert r.status == 400 and r.error_code == "InvalidQueryParameterValue", r
    assert r.body.startswith(b"<?xml"), r
    r = raw.get("/%s-secondary/?restype=service&comp=stats" % raw.account,
                accept=None)
    assert r.status == 200, r
    assert svc.get_service_stats()["geo_replication"]["status"] == "live"


# ------------------------------------------------------------ $top=0
def test_top_zero_is_an_empty_page(raw, booltable):
    """$top=0 (Storage Explorer sends it): 200 with no entities and no
    continuation, as Azure answers (Azurite#1428); the table must exist."""
    for q in ("?$top=0",
              "?%24select=&%24filter=PartitionKey%20eq%20%27a%27&%24top=0"):
        r = raw.get(raw.path("/booltable()" + q))
        assert r.status == 200, r
        assert r.json()["value"] == [], r
        assert r.header("x-ms-continuation-NextPartitionKey") is None
    r = raw.get(raw.path("/nosuchtable()?$top=0"))
    assert r.status == 404 and r.error_code == "TableNotFound", r
    r = raw.get(raw.path("/Tables?$top=0"))
    assert r.status == 200 and r.json()["value"] == [], r
    assert r.header("x-ms-continuation-NextTableName") is None
    r = raw.get(raw.path("/booltable()?$top=-1"))
    assert r.status == 400 and r.error_code == "InvalidQueryParameterValue"
