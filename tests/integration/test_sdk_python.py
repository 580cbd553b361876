"""The official Python SDK (azure-data-tables 12.4.2, Debian python3-azure)
against a real cluster: every operation of docs/table-api-spec.md §3
through TableServiceClient / TableClient, every EDM type, the limits of §9,
the exact error codes of §8, ETag/Timestamp rules (§4.3, §4.4), $filter on
every type (§6), paging, transactions (§5), ACLs, service properties, SAS
(§7.3, §7.4) and concurrent writers.

One cluster per module (the `cluster` fixture); each test makes its own
tables, so tests are independent and may run in any order. Error codes are
read from err.error_code, or from the x-ms-error-code header where the SDK
re-raises without decoding (create_entity in 12.4.2).
"""

import base64
import concurrent.futures
import datetime
import itertools
import math
import time
import uuid

import pytest
from azure.core import MatchConditions
from azure.core.credentials import AzureNamedKeyCredential, AzureSasCredential
from azure.core.exceptions import (HttpResponseError, ResourceExistsError,
                                   ResourceModifiedError,
                                   ResourceNotFoundError)
from azure.data.tables import (AccountSasPermissions, EdmType, EntityProperty,
                               RequestTooLargeError, ResourceTypes,
                               TableAccessPolicy, TableAnalyticsLogging,
                               TableClient, TableCorsRule, TableMetrics,
                               TableRetentionPolicy, TableSasPermissions,
                               TableServiceClient, TableTransactionError,
                               UpdateMode, generate_account_sas,
                               generate_table_sas)

UTC = datetime.timezone.utc
KEY_ERRORS = ("InvalidInput", "OutOfRangeInput")
_seq = itertools.count()


# ------------------------------------------------------------ helpers
def tname(prefix="t"):
    """A fresh valid table name (letters and digits)."""
    return "%s%05d" % (prefix, next(_seq))


def code_of(err):
    """The Azure error code of an SDK exception: error_code if the SDK
    decoded it, else the x-ms-error-code response header."""
    c = getattr(err, "error_code", None)
    c = getattr(c, "value", c)
    if c is None and getattr(err, "response", None) is not None:
        c = err.response.headers.get("x-ms-error-code")
    return c


def raises(fn, status, codes=None, exc=HttpResponseError):
    """Runs @fn, which must raise @exc with HTTP @status and (if given) an
    error code in @codes (a string or a tuple). Returns the exception."""
    with pytest.raises(exc) as ei:
        fn()
    e = ei.value
    got = (getattr(e, "status_code", None), code_of(e))
    assert got[0] == status, "want %s %s, got %r: %s" % (
        status, codes, got, str(e)[:400])
    if codes is not None:
        if isinstance(codes, str):
            codes = (codes,)
        assert got[1] in codes, "want %s %s, got %r: %s" % (
            status, codes, got, str(e)[:400])
    return e


def keys_of(entities):
    return [(e["PartitionKey"], e["RowKey"]) for e in entities]


def props(entity):
    """User properties only (no PartitionKey/RowKey)."""
    return {k: v for k, v in entity.items()
            if k not in ("PartitionKey", "RowKey")}


# ------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def svc(cluster):
    return cluster.table_service_client()


@pytest.fixture
def tc(svc):
    """A fresh, empty table."""
    return svc.create_table(tname("e"))


@pytest.fixture(scope="module")
def cred(cluster):
    return AzureNamedKeyCredential(cluster.account, cluster.key)


# ================================================================ tables
def test_create_table_returns_client(svc):
    """create_table returns a TableClient for the new table."""
    name = tname("ct")
    t = svc.create_table(name)
    assert isinstance(t, TableClient) and t.table_name == name
    assert list(t.list_entities()) == []


def test_create_table_if_not_exists_new(svc):
    """create_table_if_not_exists creates a missing table."""
    name = tname("cine")
    t = svc.create_table_if_not_exists(name)
    assert t.table_name == name
    assert name in [x.name for x in svc.query_tables(
        "TableName eq @n", parameters={"n": name})]


def test_create_table_if_not_exists_existing(svc):
    """create_table_if_not_exists on an existing table returns a client and
    keeps the data."""
    t = svc.create_table(tname("cie"))
    t.create_entity({"PartitionKey": "p", "RowKey": "r", "v": 1})
    t2 = svc.create_table_if_not_exists(t.table_name)
    assert t2.get_entity("p", "r")["v"] == 1


def test_create_table_conflict(svc):
    """Create Table on an existing name: 409 TableAlreadyExists."""
    name = tname("dup")
    svc.create_table(name)
    raises(lambda: svc.create_table(name), 409, "TableAlreadyExists",
           ResourceExistsError)


def test_create_table_conflict_case_insensitive(svc):
    """Table names clash case-insensitively (§9)."""
    name = tname("Case")
    svc.create_table(name)
    raises(lambda: svc.create_table(name.upper()), 409, "TableAlreadyExists",
           ResourceExistsError)
    raises(lambda: svc.create_table(name.lower()), 409, "TableAlreadyExists",
           ResourceExistsError)


def test_table_name_case_preserved_and_addressable(svc):
    """Names keep their creation case in listings; the table can be used
    under any case (§1.2)."""
    name = "MiXeD" + tname("Case")
    svc.create_table(name)
    listed = [t.name for t in svc.list_tables()]
    assert name in listed and name.lower() not in listed
    svc.get_table_client(name.upper()).create_entity(
        {"PartitionKey": "p", "RowKey": "r"})
    assert svc.get_table_client(name.lower()).get_entity("p", "r")


@pytest.mark.parametrize("name", [
    "1abc",            # starts with a digit
    "ab-cd",           # dash
    "ab_cd",           # underscore
    "abc.d",           # dot
    "ab",              # too short
    "a" * 64,          # too long
])
def test_create_table_bad_name(svc, name):
    """Bad table names: the server answers 400 InvalidResourceName /
    OutOfRangeInput with the exact messages the SDK keys off (§8.1), which
    it turns into a ValueError."""
    with pytest.raises(ValueError) as ei:
        svc.create_table(name)
    assert "Storage table names must be alphanumeric" in str(ei.value)


def test_create_table_reserved_name(svc):
    """'Tables' is reserved in any case: 400 (§9)."""
    for name in ("Tables", "tables", "TABLES"):
        raises(lambda: svc.create_table(name), 400,
               ("InvalidResourceName", "InvalidInput", "OutOfRangeInput"))


@pytest.mark.parametrize("name", ["abc", "A" + "b1" * 31])
def test_create_table_length_bounds(svc, name):
    """3 and 63 characters are the allowed bounds."""
    t = svc.create_table(name)
    t.create_entity({"PartitionKey": "", "RowKey": ""})
    assert len(list(t.list_entities())) == 1
    svc.delete_table(name)


def test_delete_table(svc):
    """delete_table removes the table: its entities get 404 TableNotFound
    and it leaves Query Tables."""
    name = tname("del")
    t = svc.create_table(name)
    t.create_entity({"PartitionKey": "p", "RowKey": "r"})
    svc.delete_table(name)
    assert name not in [x.name for x in svc.list_tables()]
    raises(lambda: list(t.list_entities()), 404, "TableNotFound",
           ResourceNotFoundError)
    raises(lambda: t.create_entity({"PartitionKey": "p", "RowKey": "s"}),
           404, "TableNotFound", ResourceNotFoundError)


def test_delete_missing_table_no_error(svc):
    """Deleting a missing table: the 404 ResourceNotFound is swallowed by
    the SDK (§3.3)."""
    svc.delete_table(tname("nosuch"))
    svc.get_table_client(tname("nosuch")).delete_table()


def test_delete_then_recreate_is_being_deleted(svc):
    """Recreating a just-deleted name: 409 TableBeingDeleted during the
    deletion grace period (spec §3.3)."""
    name = tname("grace")
    svc.create_table(name)
    svc.delete_table(name)
    raises(lambda: svc.create_table(name), 409, "TableBeingDeleted")


def test_delete_table_via_table_client(svc):
    """TableClient.delete_table deletes its own table."""
    t = svc.create_table(tname("tcdel"))
    t.delete_table()
    assert t.table_name not in [x.name for x in svc.list_tables()]


def test_list_tables_contains_created(svc):
    """list_tables lists every created table, ordered by name
    (case-insensitively, §3.1)."""
    names = [tname("lst") for _ in range(3)]
    for n in names:
        svc.create_table(n)
    listed = [t.name for t in svc.list_tables()]
    assert set(names) <= set(listed)
    assert listed == sorted(listed, key=str.lower)


def test_list_tables_results_per_page(svc):
    """results_per_page pages Query Tables with NextTableName: every page
    has at most n tables and the pages join to the full listing."""
    for _ in range(7):
        svc.create_table(tname("pg"))
    full = [t.name for t in svc.list_tables()]
    pages = [[t.name for t in p]
             for p in svc.list_tables(results_per_page=3).by_page()]
    assert len(pages) >= 3
    assert all(1 <= len(p) <= 3 for p in pages[:-1]), pages
    assert [n for p in pages for n in p] == full


def test_query_tables_filter_eq(svc):
    """query_tables with TableName eq returns exactly that table."""
    name = tname("qt")
    svc.create_table(name)
    got = [t.name for t in svc.query_tables("TableName eq '%s'" % name)]
    assert got == [name]


def test_query_tables_parameters(svc):
    """query_tables with @name parameters."""
    name = tname("qtp")
    svc.create_table(name)
    got = [t.name for t in svc.query_tables("TableName eq @n",
                                            parameters={"n": name})]
    assert got == [name]


def test_query_tables_range(svc):
    """A prefix scan on TableName (ge/lt) returns the tables with that
    prefix, in order."""
    names = sorted("rng%s" % c for c in ("Aaa", "Bbb", "Ccc"))
    for n in names:
        svc.create_table(n)
    got = [t.name for t in svc.query_tables(
        "TableName ge @lo and TableName lt @hi",
        parameters={"lo": "rng", "hi": "rnh"})]
    assert got == names


def test_query_tables_no_match(svc):
    """A filter matching nothing returns no tables, not an error."""
    assert list(svc.query_tables("TableName eq 'zzzNoSuchTable'")) == []


def test_query_tables_paged_with_filter(svc):
    """A filtered Query Tables pages with results_per_page."""
    names = ["qpf%02d" % i for i in range(5)]
    for n in names:
        svc.create_table(n)
    pages = list(svc.query_tables(
        "TableName ge 'qpf' and TableName lt 'qpg'",
        results_per_page=2).by_page())
    got = [t.name for p in pages for t in p]
    assert got == names
    assert len(pages) >= 3


def test_query_tables_bad_filter(svc):
    """A filter on a property other than TableName, or bad syntax: 400."""
    raises(lambda: list(svc.query_tables("TableName eq")), 400,
           ("InvalidInput",))


def test_table_client_from_connection_string(cluster):
    """TableClient.from_connection_string works on its own."""
    name = tname("fcs")
    t = TableClient.from_connection_string(cluster.connection_string, name)
    t.create_table()
    t.create_entity({"PartitionKey": "a", "RowKey": "b"})
    assert t.get_entity("a", "b")["RowKey"] == "b"


def test_table_client_from_table_url(cluster, cred):
    """TableClient.from_table_url with a named-key credential."""
    name = tname("url")
    cluster.table_service_client().create_table(name)
    t = TableClient.from_table_url("%s/%s" % (cluster.table_endpoint, name),
                                   credential=cred)
    t.create_entity({"PartitionKey": "a", "RowKey": "b"})
    assert len(list(t.list_entities())) == 1


# ================================================================ entity CRUD
def test_create_entity_metadata(tc):
    """create_entity returns the new ETag (datetime form, §4.4) and date."""
    meta = tc.create_entity({"PartitionKey": "p", "RowKey": "r", "v": 1})
    assert meta["etag"].startswith('W/"datetime\'')
    assert isinstance(meta["date"], datetime.datetime)
    assert meta["version"]


def test_create_entity_conflict(tc):
    """Insert on an existing key: 409 EntityAlreadyExists."""
    tc.create_entity({"PartitionKey": "p", "RowKey": "r"})
    raises(lambda: tc.create_entity({"PartitionKey": "p", "RowKey": "r"}),
           409, "EntityAlreadyExists", ResourceExistsError)


def test_create_entity_missing_table(svc):
    """Insert into a missing table: 404 TableNotFound."""
    t = svc.get_table_client(tname("missing"))
    raises(lambda: t.create_entity({"PartitionKey": "p", "RowKey": "r"}),
           404, "TableNotFound", ResourceNotFoundError)


def test_create_entity_without_partition_key(tc):
    """No PartitionKey: 400 PropertiesNeedValue, which the SDK maps to a
    ValueError naming the key."""
    with pytest.raises(ValueError) as ei:
        tc.create_entity({"RowKey": "r", "v": 1})
    assert "PartitionKey" in str(ei.value)


def test_create_entity_without_row_key(tc):
    """No RowKey: 400 PropertiesNeedValue -> ValueError."""
    with pytest.raises(ValueError) as ei:
        tc.create_entity({"PartitionKey": "p", "v": 1})
    assert "RowKey" in str(ei.value)


def test_get_entity(tc):
    """get_entity returns all properties with metadata etag/timestamp."""
    meta = tc.create_entity({"PartitionKey": "p", "RowKey": "r",
                             "a": "x", "b": 2})
    e = tc.get_entity("p", "r")
    assert props(e) == {"a": "x", "b": 2}
    assert e.metadata["etag"] == meta["etag"]
    assert isinstance(e.metadata["timestamp"], datetime.datetime)


def test_get_entity_select(tc):
    """get_entity with select returns only the selected properties."""
    tc.create_entity({"PartitionKey": "p", "RowKey": "r",
                      "a": "x", "b": 2, "c": True})
    e = tc.get_entity("p", "r", select=["a", "c"])
    assert props(e) == {"a": "x", "c": True}


def test_get_entity_missing(tc):
    """Get on a missing key: 404 ResourceNotFound (§3.10)."""
    raises(lambda: tc.get_entity("p", "nope"), 404,
           ("ResourceNotFound", "EntityNotFound"), ResourceNotFoundError)


def test_get_entity_missing_table(svc):
    """Get on a missing table: 404 TableNotFound."""
    t = svc.get_table_client(tname("gmiss"))
    raises(lambda: t.get_entity("p", "r"), 404, "TableNotFound",
           ResourceNotFoundError)


def test_upsert_merge_inserts(tc):
    """upsert MERGE on a missing entity inserts it."""
    tc.upsert_entity({"PartitionKey": "p", "RowKey": "r", "a": 1},
                     mode=UpdateMode.MERGE)
    assert props(tc.get_entity("p", "r")) == {"a": 1}


def test_upsert_merge_keeps_other_properties(tc):
    """upsert MERGE adds/overwrites and keeps the rest."""
    tc.create_entity({"PartitionKey": "p", "RowKey": "r", "a": 1, "b": 2})
    tc.upsert_entity({"PartitionKey": "p", "RowKey": "r", "b": 3, "c": 4},
                     mode=UpdateMode.MERGE)
    assert props(tc.get_entity("p", "r")) == {"a": 1, "b": 3, "c": 4}


def test_upsert_replace_inserts(tc):
    """upsert REPLACE on a missing entity inserts it."""
    tc.upsert_entity({"PartitionKey": "p", "RowKey": "r", "a": "x"},
                     mode=UpdateMode.REPLACE)
    assert props(tc.get_entity("p", "r")) == {"a": "x"}


def test_upsert_replace_drops_other_properties(tc):
    """upsert REPLACE replaces the whole entity."""
    tc.create_entity({"PartitionKey": "p", "RowKey": "r", "a": 1, "b": 2})
    tc.upsert_entity({"PartitionKey": "p", "RowKey": "r", "c": 3},
                     mode=UpdateMode.REPLACE)
    assert props(tc.get_entity("p", "r")) == {"c": 3}


def test_update_merge_with_etag(tc):
    """update MERGE with the current ETag and IfNotModified succeeds and
    returns a new ETag."""
    m1 = tc.create_entity({"PartitionKey": "p", "RowKey": "r", "a": 1})
    m2 = tc.update_entity({"PartitionKey": "p", "RowKey": "r", "b": 2},
                          mode=UpdateMode.MERGE, etag=m1["etag"],
                          match_condition=MatchConditions.IfNotModified)
    assert m2["etag"] != m1["etag"]
    e = tc.get_entity("p", "r")
    assert props(e) == {"a": 1, "b": 2}
    assert e.metadata["etag"] == m2["etag"]


def test_update_replace_with_etag(tc):
    """update REPLACE with the current ETag replaces all properties."""
    m1 = tc.create_entity({"PartitionKey": "p", "RowKey": "r", "a": 1})
    tc.update_entity({"PartitionKey": "p", "RowKey": "r", "b": 2},
                     mode=UpdateMode.REPLACE, etag=m1["etag"],
                     match_condition=MatchConditions.IfNotModified)
    assert props(tc.get_entity("p", "r")) == {"b": 2}


def test_update_with_entity_metadata_etag(tc):
    """update_entity with an entity read back and IfNotModified (the SDK
    takes the ETag from the entity's metadata)."""
    tc.create_entity({"PartitionKey": "p", "RowKey": "r", "n": 1})
    e = tc.get_entity("p", "r")
    e["n"] = 2
    tc.update_entity(e, etag=e.metadata["etag"],
                     match_condition=MatchConditions.IfNotModified)
    assert tc.get_entity("p", "r")["n"] == 2


@pytest.mark.parametrize("mode", [UpdateMode.MERGE, UpdateMode.REPLACE])
def test_update_stale_etag_412(tc, mode):
    """update with an outdated ETag: 412 UpdateConditionNotSatisfied, the
    entity unchanged."""
    m1 = tc.create_entity({"PartitionKey": "p", "RowKey": "r", "a": 1})
    tc.update_entity({"PartitionKey": "p", "RowKey": "r", "a": 2})
    raises(lambda: tc.update_entity(
        {"PartitionKey": "p", "RowKey": "r", "a": 3}, mode=mode,
        etag=m1["etag"], match_condition=MatchConditions.IfNotModified),
        412, "UpdateConditionNotSatisfied", ResourceModifiedError)
    assert tc.get_entity("p", "r")["a"] == 2


@pytest.mark.parametrize("mode", [UpdateMode.MERGE, UpdateMode.REPLACE])
def test_update_missing_entity_404(tc, mode):
    """Unconditional update (If-Match: *) of a missing entity: 404
    ResourceNotFound, nothing created."""
    raises(lambda: tc.update_entity(
        {"PartitionKey": "p", "RowKey": "nope", "a": 1}, mode=mode),
        404, ("ResourceNotFound", "EntityNotFound"), ResourceNotFoundError)
    assert list(tc.list_entities()) == []


def test_update_missing_entity_with_etag_404(tc):
    """Conditional update of a missing entity: 404, not 412."""
    m = tc.create_entity({"PartitionKey": "p", "RowKey": "r"})
    tc.delete_entity("p", "r")
    raises(lambda: tc.update_entity(
        {"PartitionKey": "p", "RowKey": "r", "a": 1}, etag=m["etag"],
        match_condition=MatchConditions.IfNotModified),
        404, ("ResourceNotFound", "EntityNotFound"), ResourceNotFoundError)


def test_delete_entity(tc):
    """delete_entity removes the entity."""
    tc.create_entity({"PartitionKey": "p", "RowKey": "r"})
    tc.delete_entity("p", "r")
    raises(lambda: tc.get_entity("p", "r"), 404, None, ResourceNotFoundError)


def test_delete_entity_with_etag(tc):
    """delete_entity with the current ETag and IfNotModified."""
    m = tc.create_entity({"PartitionKey": "p", "RowKey": "r"})
    tc.delete_entity("p", "r", etag=m["etag"],
                     match_condition=MatchConditions.IfNotModified)
    assert list(tc.list_entities()) == []


def test_delete_entity_stale_etag_412(tc):
    """delete_entity with an outdated ETag: 412, entity kept."""
    m = tc.create_entity({"PartitionKey": "p", "RowKey": "r", "a": 1})
    tc.upsert_entity({"PartitionKey": "p", "RowKey": "r", "a": 2})
    raises(lambda: tc.delete_entity(
        "p", "r", etag=m["etag"],
        match_condition=MatchConditions.IfNotModified),
        412, "UpdateConditionNotSatisfied", ResourceModifiedError)
    assert tc.get_entity("p", "r")["a"] == 2


def test_delete_entity_by_entity_object(tc):
    """delete_entity(entity, match_condition=IfNotModified) uses the
    entity's own ETag."""
    tc.create_entity({"PartitionKey": "p", "RowKey": "r"})
    e = tc.get_entity("p", "r")
    tc.delete_entity(e, match_condition=MatchConditions.IfNotModified)
    assert list(tc.list_entities()) == []


def test_delete_missing_entity_no_error(tc):
    """Deleting a missing entity: the SDK swallows the 404."""
    tc.delete_entity("p", "never-there")


def test_merge_none_does_not_remove(tc):
    """None-valued properties are skipped: a merge with None keeps the
    stored value (§3.13)."""
    tc.create_entity({"PartitionKey": "p", "RowKey": "r", "a": 1, "b": 2})
    tc.update_entity({"PartitionKey": "p", "RowKey": "r", "a": None, "b": 5},
                     mode=UpdateMode.MERGE)
    assert props(tc.get_entity("p", "r")) == {"a": 1, "b": 5}


def test_empty_keys(tc):
    """Empty PartitionKey and RowKey are valid (§3.11): insert, get,
    update, delete."""
    tc.create_entity({"PartitionKey": "", "RowKey": "", "v": 1})
    assert tc.get_entity("", "")["v"] == 1
    tc.update_entity({"PartitionKey": "", "RowKey": "", "v": 2})
    assert tc.get_entity("", "")["v"] == 2
    tc.delete_entity("", "")
    assert list(tc.list_entities()) == []


@pytest.mark.parametrize("key", [
    "o'brien", "''", "a b", "100%", "a+b=c&d", "(x),[y]", "Zürich ☃ 日本",
    "emoji 😀", "~!@$^*;:", "%27%2F", "tab-less,comma",
])
def test_nasty_keys_roundtrip(tc, key):
    """Keys with quotes, spaces, %, +, &, parens, non-ASCII and astral
    characters survive URL escaping in every single-entity operation."""
    tc.create_entity({"PartitionKey": key, "RowKey": key, "v": 1})
    assert tc.get_entity(key, key)["v"] == 1
    tc.update_entity({"PartitionKey": key, "RowKey": key, "v": 2},
                     mode=UpdateMode.REPLACE)
    tc.upsert_entity({"PartitionKey": key, "RowKey": key, "w": 3})
    e = tc.get_entity(key, key)
    assert (e["PartitionKey"], e["RowKey"]) == (key, key)
    assert props(e) == {"v": 2, "w": 3}
    assert keys_of(tc.list_entities()) == [(key, key)]
    tc.delete_entity(key, key)
    assert list(tc.list_entities()) == []


def test_nasty_keys_in_filters(tc):
    """The same keys as filter literals (quotes doubled by the SDK's
    parameter substitution) select exactly their entity."""
    keys = ["o'brien", "''", "a b", "100%", "a+b=c&d", "(x),[y]",
            "Zürich ☃ 日本", "emoji 😀", "~!@$^*;:", "%27%2F"]
    for k in keys:
        tc.create_entity({"PartitionKey": k, "RowKey": k})
    for k in keys:
        got = list(tc.query_entities("PartitionKey eq @k and RowKey eq @k",
                                     parameters={"k": k}))
        assert keys_of(got) == [(k, k)], k


def test_key_order_is_ordinal(tc):
    """Entities come back in ordinal (code-unit) key order: upper case
    before lower case, ASCII before Latin-1 before CJK (§3.9, §6.2; all
    keys in the BMP, where UTF-8 and UTF-16 orders agree)."""
    keys = ["b", "B", "a", "A", "Z", "z", "~", " ", "0", "é", "Ω", "中",
            "\uff01", "ab", "a b", "a\u00a0"]
    for k in keys:
        tc.create_entity({"PartitionKey": k, "RowKey": k})
        tc.create_entity({"PartitionKey": "same", "RowKey": k})
    got = keys_of(tc.list_entities())
    want = sorted([(k, k) for k in keys] + [("same", k) for k in keys])
    assert got == want
    got = keys_of(tc.query_entities("PartitionKey eq 'same' and RowKey gt "
                                    "'Z'"))
    assert got == [("same", k) for k in sorted(keys) if k > "Z"]


def test_key_order_supplementary_vs_high_bmp(tc):
    """UTF-16 ordinal order, Azure's, puts an astral character (surrogates
    0xD8..) before U+FF01 (UTF-8 byte order would put it after), in RowKey
    and PartitionKey order and in a $filter comparison
    (tests/integration/test_key_order.py covers splits and paging)."""
    for k in ("\uff01", "\U0001F600"):
        tc.create_entity({"PartitionKey": "p", "RowKey": k})
        tc.create_entity({"PartitionKey": k, "RowKey": "r"})
    assert [e["RowKey"] for e in tc.list_entities()
            if e["PartitionKey"] == "p"] == ["\U0001F600", "\uff01"]
    assert [e["PartitionKey"] for e in tc.list_entities()
            if e["RowKey"] == "r"] == ["\U0001F600", "\uff01"]
    got = tc.query_entities("PartitionKey eq 'p' and RowKey lt @k",
                            parameters={"k": "\uff01"})
    assert [e["RowKey"] for e in got] == ["\U0001F600"]


def test_timestamp_in_body_ignored(tc):
    """A client-sent Timestamp is ignored; the server assigns its own
    (§4.3)."""
    old = datetime.datetime(2001, 1, 1, tzinfo=UTC)
    tc.create_entity({"PartitionKey": "p", "RowKey": "r", "Timestamp": old})
    e = tc.get_entity("p", "r")
    assert "Timestamp" not in e
    assert e.metadata["timestamp"].year >= 2020


def test_timestamp_is_now(tc):
    """The server Timestamp is close to the local clock (same machine)."""
    before = datetime.datetime.now(UTC) - datetime.timedelta(seconds=60)
    tc.create_entity({"PartitionKey": "p", "RowKey": "r"})
    after = datetime.datetime.now(UTC) + datetime.timedelta(seconds=60)
    ts = tc.get_entity("p", "r").metadata["timestamp"]
    assert before <= ts <= after


def test_etag_and_timestamp_change_on_every_write(tc):
    """Every write (insert, replace, merge, both upserts, conditional
    update) gives a new ETag and a later Timestamp; the ETag read back
    equals the one the write returned (§4.3, §4.4)."""
    pk, rk = "p", "r"
    ent = {"PartitionKey": pk, "RowKey": rk}
    metas = [tc.create_entity(dict(ent, n=0))]
    metas.append(tc.update_entity(dict(ent, n=1), mode=UpdateMode.REPLACE))
    metas.append(tc.update_entity(dict(ent, n=2), mode=UpdateMode.MERGE))
    metas.append(tc.upsert_entity(dict(ent, n=3), mode=UpdateMode.MERGE))
    metas.append(tc.upsert_entity(dict(ent, n=4), mode=UpdateMode.REPLACE))
    metas.append(tc.update_entity(
        dict(ent, n=5), etag=metas[-1]["etag"],
        match_condition=MatchConditions.IfNotModified))
    # The same write content twice still changes the ETag.
    metas.append(tc.upsert_entity(dict(ent, n=5)))
    etags = [m["etag"] for m in metas]
    assert len(set(etags)) == len(etags), etags
    e = tc.get_entity(pk, rk)
    assert e.metadata["etag"] == etags[-1]
    stamps = [e.metadata["timestamp"]]
    assert e["n"] == 5
    # The ETag embeds the Timestamp; they must increase.
    ts = [m["etag"].split("'")[1] for m in metas]
    assert ts == sorted(ts) and len(set(ts)) == len(ts), ts
    assert stamps[0].tables_service_value.replace(":", "%3A") == ts[-1]


def test_etag_matches_timestamp(tc):
    """ETag = W/"datetime'<Timestamp with ':' as %3A>'" (§4.4)."""
    tc.create_entity({"PartitionKey": "p", "RowKey": "r"})
    e = tc.get_entity("p", "r")
    ts = e.metadata["timestamp"].tables_service_value
    assert e.metadata["etag"] == "W/\"datetime'%s'\"" % ts.replace(":",
                                                                     "%3A")
    assert len(ts.split(".")[-1]) <= 8 and ts.endswith("Z")


# ================================================================ types
def roundtrip(tc, value, rk=None):
    rk = rk or str(uuid.uuid4())
    tc.create_entity({"PartitionKey": "types", "RowKey": rk, "v": value})
    return tc.get_entity("types", rk)["v"]


@pytest.mark.parametrize("s", [
    "plain", "", "Ünïcødé ☃", "emoji 😀🎉 mixed", "日本語テキスト",
    "quotes ' \" and \\ backslash", "line\nbreak\ttab\r",
    "2024-01-01T00:00:00Z", "  padded  ", "x" * 32000,
], ids=["plain", "empty", "latin", "emoji", "cjk", "quotes", "controls",
        "datelike", "padded", "32000chars"])
def test_string_roundtrip(tc, s):
    """Strings round-trip exactly (including empty, control characters,
    astral characters, date-looking text that must stay a string, and
    32,000 characters)."""
    got = roundtrip(tc, s)
    assert type(got) is str and got == s


def test_string_32768_too_large(tc):
    """A 32,768-character string: 400 PropertyValueTooLarge (§9)."""
    raises(lambda: tc.create_entity({"PartitionKey": "p", "RowKey": "r",
                                     "v": "x" * 32768}),
           400, "PropertyValueTooLarge")


def test_string_limit_counts_utf16(tc):
    """The string limit counts UTF-16 units: 16,000 astral characters
    (32,000 units) fit, 16,384 (32,768 units) do not."""
    assert roundtrip(tc, "😀" * 16000) == "😀" * 16000
    raises(lambda: tc.create_entity({"PartitionKey": "p", "RowKey": "big",
                                     "v": "😀" * 16384}),
           400, "PropertyValueTooLarge")


@pytest.mark.parametrize("n", [0, 1, -1, 2 ** 31 - 1, -2 ** 31, 123456])
def test_int32_roundtrip(tc, n):
    """Python ints within int32 round-trip as int (Edm.Int32)."""
    got = roundtrip(tc, n)
    assert type(got) is int and got == n


@pytest.mark.parametrize("n", [0, 5, -5, 2 ** 31, -2 ** 31 - 1, 2 ** 53 + 1,
                               2 ** 63 - 1, -2 ** 63])
def test_int64_roundtrip(tc, n):
    """EntityProperty(n, INT64) round-trips as INT64 with the exact value
    (string-encoded, §4.2)."""
    got = roundtrip(tc, EntityProperty(n, EdmType.INT64))
    assert isinstance(got, EntityProperty)
    assert got.edm_type == EdmType.INT64 and got.value == n


@pytest.mark.parametrize("x", [0.0, 1.5, -2.25, 0.1, 1 / 3, math.pi, 2.0,
                               1e20, 1e308, 5e-324, -1.7976931348623157e308,
                               123456789.12345679, 2.0 ** 53])
def test_double_roundtrip(tc, x):
    """Doubles round-trip bit-exactly and stay floats, integral ones too
    (the server must write them with a '.' or exponent, §4.2)."""
    got = roundtrip(tc, x)
    assert type(got) is float, (x, got)
    assert got == x


def test_double_negative_zero(tc):
    """-0.0 comes back as a float zero."""
    got = roundtrip(tc, -0.0)
    assert type(got) is float and got == 0.0


@pytest.mark.parametrize("x", [float("nan"), float("inf"), float("-inf")])
def test_double_special_values(tc, x):
    """NaN and ±Infinity round-trip (as annotated strings on the wire)."""
    got = roundtrip(tc, x)
    assert type(got) is float
    assert (math.isnan(got) and math.isnan(x)) or got == x


def test_double_annotated_integral(tc):
    """EntityProperty(2, DOUBLE) is sent as an annotated JSON integer; it
    is stored and returned as a Double."""
    got = roundtrip(tc, EntityProperty(2, EdmType.DOUBLE))
    assert type(got) is float and got == 2.0


@pytest.mark.parametrize("b", [True, False])
def test_bool_roundtrip(tc, b):
    got = roundtrip(tc, b)
    assert type(got) is bool and got is b


def test_bool_annotated(tc):
    """EntityProperty(True, BOOLEAN) with its annotation."""
    assert roundtrip(tc, EntityProperty(True, EdmType.BOOLEAN)) is True


def test_int32_annotated(tc):
    """EntityProperty(7, INT32) with an explicit annotation."""
    got = roundtrip(tc, EntityProperty(7, EdmType.INT32))
    assert type(got) is int and got == 7


def test_string_annotated(tc):
    """EntityProperty('123', STRING) stays a string."""
    got = roundtrip(tc, EntityProperty("123", EdmType.STRING))
    assert type(got) is str and got == "123"


@pytest.mark.parametrize("dt", [
    datetime.datetime(2024, 5, 1, 10, 11, 12, 345678, tzinfo=UTC),
    datetime.datetime(2024, 5, 1, 10, 11, 12, tzinfo=UTC),
    datetime.datetime(2000, 2, 29, 23, 59, 59, 999999, tzinfo=UTC),
    datetime.datetime(1970, 1, 1, tzinfo=UTC),
    datetime.datetime(2024, 5, 1, 12, 0, 0, 1,
                      tzinfo=datetime.timezone(datetime.timedelta(hours=5))),
])
def test_datetime_roundtrip(tc, dt):
    """Datetimes round-trip to the microsecond, in UTC."""
    got = roundtrip(tc, dt)
    assert isinstance(got, datetime.datetime)
    assert got == dt and got.utcoffset() == datetime.timedelta(0)


def test_datetime_seven_digit_service_value(tc):
    """A 7-digit DateTime keeps its exact text: TablesEntityDatetime
    exposes it as tables_service_value, and writing that object back keeps
    the 100-ns digit (§4.3)."""
    text = "2021-04-07T23:56:22.6754067Z"
    got = roundtrip(tc, EntityProperty(text, EdmType.DATETIME), rk="seven")
    assert got.tables_service_value == text
    assert got == datetime.datetime(2021, 4, 7, 23, 56, 22, 675406,
                                    tzinfo=UTC)
    tc.upsert_entity({"PartitionKey": "types", "RowKey": "copy", "v": got})
    assert tc.get_entity("types", "copy")["v"].tables_service_value == text


@pytest.mark.parametrize("text,want", [
    ("2008-07-10T00:00:00Z", "2008-07-10T00:00:00Z"),
    ("2008-07-10T00:00:00", "2008-07-10T00:00:00Z"),
    ("2008-07-10T00:00:00.1200000Z", "2008-07-10T00:00:00.12Z"),
    ("2008-07-10T02:00:00+02:00", "2008-07-10T00:00:00Z"),
    ("1601-01-01T00:00:00Z", "1601-01-01T00:00:00Z"),
    ("9999-12-31T23:59:59.9999999Z", "9999-12-31T23:59:59.9999999Z"),
])
def test_datetime_output_format(tc, text, want):
    """DateTime values are written back in .NET round-trip form: UTC, up
    to 7 fraction digits, trailing zeros removed (§4.3); the range bounds
    1601..9999 are accepted."""
    got = roundtrip(tc, EntityProperty(text, EdmType.DATETIME))
    assert got.tables_service_value == want


@pytest.mark.parametrize("text", [
    "1600-12-31T23:59:59Z", "2024-13-01T00:00:00Z", "not a date", "",
    "2024-02-30T00:00:00Z",
])
def test_datetime_invalid(tc, text):
    """Out-of-range or malformed DateTime values: 400 (§4.3)."""
    raises(lambda: tc.create_entity(
        {"PartitionKey": "p", "RowKey": "r",
         "v": EntityProperty(text, EdmType.DATETIME)}),
        400, ("InvalidInput", "OutOfRangeInput", "InvalidValueType"))


@pytest.mark.parametrize("b", [b"", b"\x00", bytes(range(256)),
                               b"\xff" * 1000])
def test_binary_roundtrip(tc, b):
    """Binary values round-trip as bytes (including empty)."""
    got = roundtrip(tc, b)
    assert type(got) is bytes and got == b


def test_binary_64k_limit(tc):
    """Binary: 65,536 bytes fit, 65,537 give 400 PropertyValueTooLarge."""
    big = bytes(range(256)) * 256
    assert roundtrip(tc, big) == big
    raises(lambda: tc.create_entity({"PartitionKey": "p", "RowKey": "r",
                                     "v": big + b"x"}),
           400, "PropertyValueTooLarge")


@pytest.mark.parametrize("g", [
    uuid.UUID(int=0), uuid.UUID("c9da6455-213d-42c9-9a79-3e9149a57833"),
    uuid.UUID("ffffffff-ffff-ffff-ffff-ffffffffffff")])
def test_guid_roundtrip(tc, g):
    got = roundtrip(tc, g)
    assert isinstance(got, uuid.UUID) and got == g


def test_bad_guid_rejected(tc):
    """An Edm.Guid that is not a GUID: 400 InvalidInput."""
    raises(lambda: tc.create_entity(
        {"PartitionKey": "p", "RowKey": "r",
         "v": EntityProperty("not-a-guid", EdmType.GUID)}),
        400, ("InvalidInput", "InvalidValueType"))


def test_bad_int64_rejected(tc):
    """Edm.Int64 out of range (2**63): the SDK refuses it client-side."""
    with pytest.raises(TypeError):
        tc.create_entity({"PartitionKey": "p", "RowKey": "r",
                          "v": EntityProperty(2 ** 63, EdmType.INT64)})


def test_int_outside_int32_refused_by_sdk(tc):
    """12.4.2 refuses plain ints outside int32 client-side (TypeError)."""
    with pytest.raises(TypeError):
        tc.create_entity({"PartitionKey": "p", "RowKey": "r", "v": 2 ** 31})


def test_none_property_skipped(tc):
    """None properties are not stored (§4.2)."""
    tc.create_entity({"PartitionKey": "p", "RowKey": "r", "a": None, "b": 1})
    assert props(tc.get_entity("p", "r")) == {"b": 1}


def test_all_types_in_one_entity(tc):
    """One entity with every type reads back with every type, also via
    list_entities."""
    want = {
        "PartitionKey": "p", "RowKey": "r",
        "s": "str", "i": 42, "l": EntityProperty(2 ** 40, EdmType.INT64),
        "d": 3.5, "b": True,
        "t": datetime.datetime(2020, 1, 2, 3, 4, 5, 6, tzinfo=UTC),
        "g": uuid.UUID(int=99), "x": b"\x01\x02",
    }
    tc.create_entity(want)
    for got in (tc.get_entity("p", "r"), list(tc.list_entities())[0]):
        assert got["s"] == "str" and got["i"] == 42
        assert got["l"] == EntityProperty(2 ** 40, EdmType.INT64)
        assert got["d"] == 3.5 and got["b"] is True
        assert got["t"] == want["t"] and got["g"] == want["g"]
        assert got["x"] == b"\x01\x02"


def test_property_names_case_sensitive(tc):
    """'a' and 'A' are different properties."""
    tc.create_entity({"PartitionKey": "p", "RowKey": "r", "a": 1, "A": 2})
    assert props(tc.get_entity("p", "r")) == {"a": 1, "A": 2}


@pytest.mark.parametrize("name", ["_under", "Name2", "x" * 255, "CamelCase_9",
                                  "Größe", "名前"])
def test_valid_property_names(tc, name):
    """Identifier-like names up to 255 characters are accepted."""
    tc.create_entity({"PartitionKey": "p", "RowKey": "r", name: 1})
    assert props(tc.get_entity("p", "r")) == {name: 1}


def test_property_name_too_long(tc):
    """A 256-character property name: 400 PropertyNameTooLong."""
    raises(lambda: tc.create_entity({"PartitionKey": "p", "RowKey": "r",
                                     "x" * 256: 1}),
           400, "PropertyNameTooLong")


@pytest.mark.parametrize("name", ["1abc", "has-dash", "has space",
                                  "dollar$", "dot.name", ""])
def test_property_name_invalid(tc, name):
    """Names that are not identifiers: 400 PropertyNameInvalid (§9)."""
    raises(lambda: tc.create_entity({"PartitionKey": "p", "RowKey": "r",
                                     name: 1}),
           400, "PropertyNameInvalid")


# ================================================================ limits
def test_252_properties_ok(tc):
    """252 custom properties (255 with PK, RK, Timestamp) are accepted."""
    ent = {"PartitionKey": "p", "RowKey": "r"}
    ent.update({"p%03d" % i: i for i in range(252)})
    tc.create_entity(ent)
    assert len(props(tc.get_entity("p", "r"))) == 252


def test_253_properties_too_many(tc):
    """253 custom properties: 400 TooManyProperties."""
    ent = {"PartitionKey": "p", "RowKey": "r"}
    ent.update({"p%03d" % i: i for i in range(253)})
    raises(lambda: tc.create_entity(ent), 400, "TooManyProperties")


def test_merge_beyond_255_properties(tc):
    """A merge whose result would exceed the limit: 400 TooManyProperties,
    entity unchanged."""
    ent = {"PartitionKey": "p", "RowKey": "r"}
    ent.update({"a%03d" % i: i for i in range(200)})
    tc.create_entity(ent)
    upd = {"PartitionKey": "p", "RowKey": "r"}
    upd.update({"b%03d" % i: i for i in range(60)})
    raises(lambda: tc.update_entity(upd, mode=UpdateMode.MERGE), 400,
           "TooManyProperties")
    assert len(props(tc.get_entity("p", "r"))) == 200


def test_entity_just_under_1mib(tc):
    """15 binary properties of 64 KiB (< 1 MiB in total) are accepted."""
    ent = {"PartitionKey": "p", "RowKey": "r"}
    ent.update({"b%02d" % i: bytes([i]) * 65536 for i in range(15)})
    tc.create_entity(ent)
    got = tc.get_entity("p", "r")
    assert all(got["b%02d" % i] == bytes([i]) * 65536 for i in range(15))


def test_entity_over_1mib(tc):
    """17 binary properties of 64 KiB (> 1 MiB): 400 EntityTooLarge."""
    ent = {"PartitionKey": "p", "RowKey": "r"}
    ent.update({"b%02d" % i: bytes([i]) * 65536 for i in range(17)})
    raises(lambda: tc.create_entity(ent), 400, "EntityTooLarge")
    assert list(tc.list_entities()) == []


def test_entity_over_1mib_strings(tc):
    """40 strings of 30,000 characters (> 1 MiB however it is counted):
    400 EntityTooLarge, also through upsert."""
    ent = {"PartitionKey": "p", "RowKey": "r"}
    ent.update({"s%02d" % i: chr(65 + i % 26) * 30000 for i in range(40)})
    raises(lambda: tc.create_entity(ent), 400, "EntityTooLarge")
    raises(lambda: tc.upsert_entity(ent), 400, "EntityTooLarge")


@pytest.mark.parametrize("ch", ["/", "\\", "#", "?", "\x00", "\x01", "\x1f",
                                "\x7f", "\x85", "\x9f"])
@pytest.mark.parametrize("which", ["PartitionKey", "RowKey"])
def test_forbidden_key_chars_insert(tc, ch, which):
    """Keys with '/', '\\', '#', '?' or control characters: 400 on insert
    (keys in the body, §9)."""
    ent = {"PartitionKey": "p", "RowKey": "r"}
    ent[which] = "a%sb" % ch
    raises(lambda: tc.create_entity(ent), 400, KEY_ERRORS)
    assert list(tc.list_entities()) == []


@pytest.mark.parametrize("ch", ["/", "\\", "#", "?", "\x01", "\x7f"])
def test_forbidden_key_chars_upsert(tc, ch):
    """The same keys in the URL (upsert builds the key predicate): 400,
    nothing written."""
    raises(lambda: tc.upsert_entity({"PartitionKey": "a%sb" % ch,
                                     "RowKey": "r"}),
           400, KEY_ERRORS + ("InvalidUri",))
    assert list(tc.list_entities()) == []


def test_key_length_limit(tc):
    """Keys of 1,024 UTF-16 units are accepted; 1,025 are refused with 400
    (§9, §12 item 2, rangetable's default)."""
    k = "k" * 1024
    tc.create_entity({"PartitionKey": k, "RowKey": k})
    assert tc.get_entity(k, k)["RowKey"] == k
    raises(lambda: tc.create_entity({"PartitionKey": "k" * 1025,
                                     "RowKey": "r"}),
           400, KEY_ERRORS)
    raises(lambda: tc.create_entity({"PartitionKey": "p",
                                     "RowKey": "k" * 1025}),
           400, KEY_ERRORS)


def test_key_length_counts_utf16(tc):
    """512 astral characters (1,024 UTF-16 units) fit in a key, 513 do
    not."""
    k = "😀" * 512
    tc.create_entity({"PartitionKey": "p", "RowKey": k})
    assert tc.get_entity("p", k)["RowKey"] == k
    raises(lambda: tc.create_entity({"PartitionKey": "p",
                                     "RowKey": "😀" * 513}),
           400, KEY_ERRORS)


# ================================================================ queries
TYPED_N = 10
BASE_DT = datetime.datetime(2020, 1, 1, tzinfo=UTC)


def typed_entity(i):
    e = {
        "PartitionKey": "p%d" % (i % 2), "RowKey": "r%02d" % i,
        "s": "str%02d" % i,
        "i32": i * 10 - 30,
        "i64": EntityProperty(2 ** 40 + i, EdmType.INT64),
        "d": i + 0.5,
        "b": i % 3 == 0,
        "dt": BASE_DT + datetime.timedelta(days=i),
        "g": uuid.UUID(int=i + 1),
        "bin": bytes([i, i]),
    }
    if i == 4:
        e["s"] = "it's"
    if i == 9:
        del e["s"]
        e["only9"] = "x"
    return e


@pytest.fixture(scope="module")
def typed(svc):
    t = svc.create_table(tname("typed"))
    for i in range(TYPED_N):
        t.create_entity(typed_entity(i))
    return t


def _rows(pred):
    return sorted(("p%d" % (i % 2), "r%02d" % i)
                  for i in range(TYPED_N) if pred(typed_entity(i)))


FILTERS = [
    ("s eq 'str03'", None, lambda e: e.get("s") == "str03"),
    ("s gt 'str05'", None, lambda e: "s" in e and e["s"] > "str05"),
    ("s eq @s", {"s": "it's"}, lambda e: e.get("s") == "it's"),
    ("i32 lt 0", None, lambda e: e["i32"] < 0),
    ("i32 ge 20", None, lambda e: e["i32"] >= 20),
    ("i32 eq -30", None, lambda e: e["i32"] == -30),
    ("i32 ne 0", None, lambda e: e["i32"] != 0),
    ("i64 gt @v", {"v": 2 ** 40 + 5}, lambda e: e["i64"].value > 2 ** 40 + 5),
    ("i64 eq 1099511627778L", None, lambda e: e["i64"].value == 2 ** 40 + 2),
    ("d le 3.5", None, lambda e: e["d"] <= 3.5),
    ("d eq @d", {"d": 2.5}, lambda e: e["d"] == 2.5),
    ("d gt 7.0", None, lambda e: e["d"] > 7.0),
    ("b eq true", None, lambda e: e["b"]),
    ("b eq @b", {"b": False}, lambda e: not e["b"]),
    ("dt ge @t", {"t": BASE_DT + datetime.timedelta(days=7)},
     lambda e: e["dt"] >= BASE_DT + datetime.timedelta(days=7)),
    ("dt lt datetime'2020-01-04T00:00:00Z'", None,
     lambda e: e["dt"] < BASE_DT + datetime.timedelta(days=3)),
    ("g eq @g", {"g": uuid.UUID(int=4)}, lambda e: e["g"].int == 4),
    ("g eq guid'00000000-0000-0000-0000-000000000003'", None,
     lambda e: e["g"].int == 3),
    ("bin eq @x", {"x": b"\x05\x05"}, lambda e: e["bin"] == b"\x05\x05"),
    ("bin eq X'0202'", None, lambda e: e["bin"] == b"\x02\x02"),
    ("bin eq binary'0303'", None, lambda e: e["bin"] == b"\x03\x03"),
    ("PartitionKey eq 'p1'", None, lambda e: e["PartitionKey"] == "p1"),
    ("PartitionKey eq 'p0' and RowKey gt 'r04'", None,
     lambda e: e["PartitionKey"] == "p0" and e["RowKey"] > "r04"),
    ("RowKey ge 'r02' and RowKey lt 'r05'", None,
     lambda e: "r02" <= e["RowKey"] < "r05"),
    ("i32 lt 0 or i32 gt 40", None, lambda e: e["i32"] < 0 or e["i32"] > 40),
    ("not (b eq true)", None, lambda e: not e["b"]),
    ("(PartitionKey eq 'p0' or PartitionKey eq 'p1') and d gt 8.0", None,
     lambda e: e["d"] > 8.0),
    ("only9 eq 'x'", None, lambda e: e.get("only9") == "x"),
    ("s ne 'zzz'", None, lambda e: "s" in e),
    ("i32 eq 'abc'", None, lambda e: False),
    ("s eq 5", None, lambda e: False),
    ("i64 gt 5", None, lambda e: True),
    ("d gt 3", None, lambda e: e["d"] > 3),
    ("Timestamp gt datetime'2000-01-01T00:00:00Z'", None, lambda e: True),
    ("Timestamp lt datetime'2000-01-01T00:00:00Z'", None, lambda e: False),
    ("i32 GT 20 AND b EQ true", None, lambda e: e["i32"] > 20 and e["b"]),
    ("nosuchprop eq 1", None, lambda e: False),
]


@pytest.mark.parametrize("flt,params,pred", FILTERS,
                         ids=[f[0] for f in FILTERS])
def test_query_filter(typed, flt, params, pred):
    """$filter on every EDM type, keys, Timestamp, and/or/not, parameters
    and cross-type comparisons (§6.1, §6.2): exactly the matching
    entities, in key order."""
    got = keys_of(typed.query_entities(flt, parameters=params))
    assert got == _rows(pred), flt


def test_query_filter_15_comparisons_ok(typed):
    """15 comparisons are within the limit (§6.1)."""
    flt = " or ".join("i32 eq %d" % (i * 10 - 30) for i in range(15))
    assert len(list(typed.query_entities(flt))) == TYPED_N


@pytest.mark.parametrize("flt", [
    "s eq",                          # incomplete
    "s eq 'unterminated",            # open string
    "startswith(s,'a')",             # functions are not supported
    "i32 eq 99999999999",            # int32 literal overflow
    "(s eq 'a'",                     # unbalanced parenthesis
    "i32 add 1 eq 2",                # arithmetic
    "dt eq datetime'notadate'",      # bad datetime literal
    "g eq guid'xyz'",                # bad guid literal
    "s eq null",                     # no null literal
    "s eq s",                        # property to property
    "bin eq X'0'",                   # odd hex digits
    "and and and",                   # token soup
    " or ".join("i32 eq %d" % i for i in range(16)),  # > 15 comparisons
])
def test_query_bad_filter(typed, flt):
    """Unsupported or malformed filters: 400 InvalidInput (§6.1), raised
    before anything is returned."""
    raises(lambda: list(typed.query_entities(flt)), 400,
           ("InvalidInput", "InvalidQueryParameterValue"))


def test_query_select(typed):
    """query_entities with select returns only those properties."""
    got = list(typed.query_entities("PartitionKey eq 'p0'",
                                    select=["s", "i32"]))
    assert len(got) == 5
    for e in got:
        assert set(e.keys()) <= {"s", "i32"}
        assert "i32" in e


def test_query_select_with_keys(typed):
    """Selecting PartitionKey/RowKey returns them."""
    got = list(typed.query_entities("RowKey eq 'r03'",
                                    select=["PartitionKey", "RowKey", "d"]))
    assert [dict(e) for e in got] == [
        {"PartitionKey": "p1", "RowKey": "r03", "d": 3.5}]


def test_query_select_absent_property(typed):
    """A selected property the entity lacks is omitted (or None)."""
    got = list(typed.query_entities("RowKey eq 'r09'", select=["s", "only9"]))
    assert len(got) == 1
    assert got[0].get("s") is None and got[0]["only9"] == "x"


def test_query_empty_table(tc):
    """Query of an empty table: no entities."""
    assert list(tc.query_entities("PartitionKey eq 'x'")) == []
    assert list(tc.list_entities()) == []


def test_query_missing_table(svc):
    """Query of a missing table: 404 TableNotFound."""
    t = svc.get_table_client(tname("qmiss"))
    raises(lambda: list(t.list_entities()), 404, "TableNotFound",
           ResourceNotFoundError)
    raises(lambda: list(t.query_entities("PartitionKey eq 'a'")), 404,
           "TableNotFound", ResourceNotFoundError)


# ---------------------------------------------------------------- paging
BIG_N = 1150
BIG_PKS = 23


@pytest.fixture(scope="module")
def big(cluster, svc):
    """1,150 entities over 23 PartitionKeys, inserted by 8 threads."""
    t = svc.create_table(tname("big"))

    def ins(part):
        c = cluster.table_service_client().get_table_client(t.table_name)
        for i in range(part, BIG_N, 8):
            c.create_entity({"PartitionKey": "pk%02d" % (i % BIG_PKS),
                             "RowKey": "rk%05d" % i, "n": i,
                             "odd": i % 2 == 1})

    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        list(ex.map(ins, range(8)))
    return t


def big_keys(pred=lambda i: True):
    return sorted(("pk%02d" % (i % BIG_PKS), "rk%05d" % i)
                  for i in range(BIG_N) if pred(i))


def test_list_all_across_partitions(big):
    """list_entities returns every entity once, ordered by (PK, RK), over
    the default 1,000-entity pages."""
    assert keys_of(big.list_entities()) == big_keys()


def test_default_page_is_at_most_1000(big):
    """Without $top, a page holds at most 1,000 entities; a continuation
    follows."""
    pages = [len(list(p)) for p in big.list_entities().by_page()]
    assert len(pages) >= 2 and all(n <= 1000 for n in pages), pages
    assert sum(pages) == BIG_N


@pytest.mark.parametrize("per_page", [1, 7, 100, 999])
def test_results_per_page(big, per_page):
    """results_per_page pages across PartitionKeys: no page larger than
    asked, same entities in the same order."""
    if per_page == 1:
        # 1,150 round trips: page only the first PartitionKeys.
        it = big.query_entities("PartitionKey le 'pk01'",
                                results_per_page=1)
        want = big_keys(lambda i: i % BIG_PKS <= 1)
    else:
        it = big.list_entities(results_per_page=per_page)
        want = big_keys()
    pages = [keys_of(p) for p in it.by_page()]
    assert all(len(p) <= per_page for p in pages)
    assert [k for p in pages for k in p] == want
    assert len(pages) >= len(want) // per_page


def test_top_above_1000_clamped(big):
    """results_per_page=5000 is clamped to 1,000 per page (§6.3)."""
    pages = [len(list(p)) for p in
             big.list_entities(results_per_page=5000).by_page()]
    assert all(n <= 1000 for n in pages) and sum(pages) == BIG_N, pages


def test_filtered_paging(big):
    """A filter matching every other entity, 25 per page: pages may be
    short but the union is exact and ordered."""
    pages = [keys_of(p) for p in big.query_entities(
        "odd eq true", results_per_page=25).by_page()]
    assert all(len(p) <= 25 for p in pages)
    assert [k for p in pages for k in p] == big_keys(lambda i: i % 2 == 1)


def test_filtered_paging_with_select(big):
    """Paging with filter and select keeps only the selected columns."""
    got = list(big.query_entities("n lt 100", select=["n"],
                                  results_per_page=30))
    assert sorted(e["n"] for e in got) == list(range(100))
    assert all(set(e.keys()) == {"n"} for e in got)


def test_continuation_token_resume(big):
    """A page's continuation token resumes exactly after that page."""
    pager = big.list_entities(results_per_page=50).by_page()
    first = keys_of(next(pager))
    token = pager.continuation_token
    assert token
    rest = big.list_entities(results_per_page=50).by_page(
        continuation_token=token)
    second = keys_of(next(rest))
    assert first + second == big_keys()[:100]


def test_large_entities_page_by_size(tc):
    """70 entities of 64 KiB (4.5 MiB in all) list completely and in order;
    the server may end pages early on size and continue (§6.4)."""
    blob = bytes(range(256)) * 256
    for i in range(70):
        tc.create_entity({"PartitionKey": "big", "RowKey": "%02d" % i,
                          "x": blob})
    pages = [list(p) for p in tc.list_entities().by_page()]
    got = [e for p in pages for e in p]
    assert [e["RowKey"] for e in got] == ["%02d" % i for i in range(70)]
    assert all(e["x"] == blob for e in got)


def test_partition_range_query(big):
    """A PartitionKey range scan returns exactly those partitions."""
    got = keys_of(big.query_entities(
        "PartitionKey ge 'pk05' and PartitionKey lt 'pk08'"))
    assert got == big_keys(lambda i: 5 <= i % BIG_PKS < 8)


def _pk(i):
    return "pk%02d" % (i % BIG_PKS)


BOUND_FILTERS = [
    ("PartitionKey eq 'pk01' or RowKey eq 'rk00050'",
     lambda i: _pk(i) == "pk01" or i == 50),
    ("not (PartitionKey lt 'pk20')", lambda i: _pk(i) >= "pk20"),
    ("PartitionKey gt 'pk21' and PartitionKey lt 'pk03'", lambda i: False),
    ("PartitionKey ge 'pk10' and PartitionKey le 'pk10' and n lt 300",
     lambda i: _pk(i) == "pk10" and i < 300),
    ("(PartitionKey eq 'pk02' or PartitionKey eq 'pk19') and odd eq true",
     lambda i: _pk(i) in ("pk02", "pk19") and i % 2 == 1),
    ("PartitionKey ne 'pk00' and n ge 1140", lambda i: _pk(i) != "pk00" and
     i >= 1140),
    ("n eq 3 or n eq 1100", lambda i: i in (3, 1100)),
    ("PartitionKey lt 'pk'", lambda i: False),
    ("PartitionKey gt 'pk22'", lambda i: False),
    ("RowKey ge 'rk01100'", lambda i: i >= 1100),
]


@pytest.mark.parametrize("flt,pred", BOUND_FILTERS,
                         ids=[f for f, _ in BOUND_FILTERS])
@pytest.mark.parametrize("per_page", [None, 3])
def test_filter_key_bounds(big, flt, pred, per_page):
    """Filters the server may turn into PartitionKey bounds (or must not:
    'or' with a RowKey term, 'not', contradictions, sparse matches) give
    exactly the matching entities, also when paged in threes (pages may be
    empty and still continue, §6.4)."""
    got = keys_of(big.query_entities(flt, results_per_page=per_page))
    assert got == big_keys(pred)


# ================================================================ batch
def test_batch_create(tc):
    """submit_transaction with creates: all visible, one ETag per op."""
    ops = [("create", {"PartitionKey": "b", "RowKey": str(i), "v": i})
           for i in range(5)]
    res = tc.submit_transaction(ops)
    assert len(res) == 5 and all(r.get("etag") for r in res)
    assert keys_of(tc.list_entities()) == [("b", str(i)) for i in range(5)]
    assert tc.get_entity("b", "3").metadata["etag"] == res[3]["etag"]


def test_batch_mixed_operations(tc):
    """One transaction with create, update (merge/replace), upsert
    (merge/replace) and delete."""
    for rk in ("u1", "u2", "d1", "m1"):
        tc.create_entity({"PartitionKey": "b", "RowKey": rk, "a": 1, "z": 0})
    ops = [
        ("create", {"PartitionKey": "b", "RowKey": "c1", "a": 1}),
        ("update", {"PartitionKey": "b", "RowKey": "u1", "a": 2},
         {"mode": UpdateMode.MERGE}),
        ("update", {"PartitionKey": "b", "RowKey": "u2", "a": 3},
         {"mode": UpdateMode.REPLACE}),
        ("upsert", {"PartitionKey": "b", "RowKey": "m1", "b": 4},
         {"mode": UpdateMode.MERGE}),
        ("upsert", {"PartitionKey": "b", "RowKey": "n1", "b": 5},
         {"mode": UpdateMode.REPLACE}),
        ("delete", {"PartitionKey": "b", "RowKey": "d1"}),
    ]
    res = tc.submit_transaction(ops)
    assert len(res) == 6
    got = {e["RowKey"]: props(e) for e in tc.list_entities()}
    assert got == {"c1": {"a": 1}, "u1": {"a": 2, "z": 0}, "u2": {"a": 3},
                   "m1": {"a": 1, "z": 0, "b": 4}, "n1": {"b": 5}}


def test_batch_failure_is_atomic(tc):
    """A failing operation (EntityAlreadyExists at index 2) fails the whole
    transaction: TableTransactionError with the index and code, nothing
    applied (§5.4)."""
    tc.create_entity({"PartitionKey": "b", "RowKey": "x"})
    ops = [("create", {"PartitionKey": "b", "RowKey": "1"}),
           ("create", {"PartitionKey": "b", "RowKey": "2"}),
           ("create", {"PartitionKey": "b", "RowKey": "x"}),
           ("create", {"PartitionKey": "b", "RowKey": "3"})]
    e = raises(lambda: tc.submit_transaction(ops), 409,
               "EntityAlreadyExists", TableTransactionError)
    assert e.index == 2
    assert keys_of(tc.list_entities()) == [("b", "x")]


def test_batch_update_missing_fails(tc):
    """Update of a missing entity inside a batch: 404 ResourceNotFound at
    its index; earlier operations rolled back."""
    ops = [("upsert", {"PartitionKey": "b", "RowKey": "1"}),
           ("update", {"PartitionKey": "b", "RowKey": "nope", "a": 1})]
    e = raises(lambda: tc.submit_transaction(ops), 404,
               ("ResourceNotFound", "EntityNotFound"), TableTransactionError)
    assert e.index == 1
    assert list(tc.list_entities()) == []


def test_batch_stale_etag_fails(tc):
    """A conditional update with an outdated ETag: 412 in the batch."""
    m = tc.create_entity({"PartitionKey": "b", "RowKey": "1", "v": 1})
    tc.upsert_entity({"PartitionKey": "b", "RowKey": "1", "v": 2})
    ops = [("update", {"PartitionKey": "b", "RowKey": "1", "v": 3},
            {"etag": m["etag"],
             "match_condition": MatchConditions.IfNotModified})]
    raises(lambda: tc.submit_transaction(ops), 412,
           "UpdateConditionNotSatisfied", TableTransactionError)
    assert tc.get_entity("b", "1")["v"] == 2


def test_batch_conditional_ok(tc):
    """A conditional update and delete with current ETags succeed."""
    m1 = tc.create_entity({"PartitionKey": "b", "RowKey": "1"})
    m2 = tc.create_entity({"PartitionKey": "b", "RowKey": "2"})
    tc.submit_transaction([
        ("update", {"PartitionKey": "b", "RowKey": "1", "v": 1},
         {"etag": m1["etag"],
          "match_condition": MatchConditions.IfNotModified}),
        ("delete", {"PartitionKey": "b", "RowKey": "2"},
         {"etag": m2["etag"],
          "match_condition": MatchConditions.IfNotModified}),
    ])
    assert keys_of(tc.list_entities()) == [("b", "1")]


def test_batch_delete_missing_fails(tc):
    """Delete of a missing entity in a batch: 404 (the SDK does not
    swallow it there)."""
    raises(lambda: tc.submit_transaction(
        [("delete", {"PartitionKey": "b", "RowKey": "nope"})]),
        404, ("ResourceNotFound", "EntityNotFound"), TableTransactionError)


def test_batch_100_operations(tc):
    """100 operations are allowed."""
    tc.submit_transaction([("create", {"PartitionKey": "b",
                                       "RowKey": "%03d" % i})
                           for i in range(100)])
    assert len(list(tc.list_entities())) == 100


def test_batch_101_operations(tc):
    """101 operations: 400 InvalidInput (§5.2), nothing written."""
    raises(lambda: tc.submit_transaction(
        [("create", {"PartitionKey": "b", "RowKey": "%03d" % i})
         for i in range(101)]), 400, "InvalidInput", HttpResponseError)
    assert list(tc.list_entities()) == []


def test_batch_duplicate_row(tc):
    """The same row twice: 400 InvalidDuplicateRow."""
    raises(lambda: tc.submit_transaction(
        [("create", {"PartitionKey": "b", "RowKey": "1"}),
         ("upsert", {"PartitionKey": "b", "RowKey": "1"})]),
        400, "InvalidDuplicateRow", HttpResponseError)
    assert list(tc.list_entities()) == []


def test_batch_missing_table(svc):
    """A batch on a missing table: 404 TableNotFound."""
    t = svc.get_table_client(tname("bmiss"))
    raises(lambda: t.submit_transaction(
        [("create", {"PartitionKey": "b", "RowKey": "1"})]),
        404, "TableNotFound", HttpResponseError)


def test_batch_too_large(tc):
    """A transaction body over 4 MiB: 413 -> RequestTooLargeError."""
    ops = [("create", {"PartitionKey": "b", "RowKey": "%03d" % i,
                       "s": "x" * 30000, "t": "y" * 30000})
           for i in range(80)]
    with pytest.raises(RequestTooLargeError) as ei:
        tc.submit_transaction(ops)
    assert ei.value.status_code == 413
    assert list(tc.list_entities()) == []


def test_batch_nasty_keys(tc):
    """Keys with quotes, spaces and non-ASCII characters in a batch."""
    keys = ["o'k", "a b", "ü日", "x''y", "%2F"]
    tc.submit_transaction([("create", {"PartitionKey": "q'p", "RowKey": k})
                           for k in keys])
    tc.submit_transaction([("update", {"PartitionKey": "q'p", "RowKey": k,
                                       "v": 1}) for k in keys])
    got = list(tc.list_entities())
    assert sorted(e["RowKey"] for e in got) == sorted(keys)
    assert all(e["v"] == 1 for e in got)


def test_batch_validation_error_index(tc):
    """A validation error inside a batch reports the operation's index."""
    ops = [("create", {"PartitionKey": "b", "RowKey": "1"}),
           ("create", {"PartitionKey": "b", "RowKey": "2", "bad-name": 1})]
    e = raises(lambda: tc.submit_transaction(ops), 400,
               "PropertyNameInvalid", HttpResponseError)
    assert getattr(e, "index", 1) == 1
    assert list(tc.list_entities()) == []


# ================================================================ ACL
def test_access_policy_roundtrip(tc):
    """set_table_access_policy / get_table_access_policy round-trip
    identifiers, times (seconds) and permissions (§3.4, §3.5)."""
    start = datetime.datetime(2024, 1, 1, tzinfo=UTC)
    expiry = datetime.datetime(2030, 2, 1, 12, 30, 45, tzinfo=UTC)
    tc.set_table_access_policy({
        "p1": TableAccessPolicy(start=start, expiry=expiry, permission="raud"),
        "readonly": TableAccessPolicy(permission="r"),
    })
    got = tc.get_table_access_policy()
    assert set(got) == {"p1", "readonly"}
    assert got["p1"].permission == "raud"
    assert got["p1"].start == start and got["p1"].expiry == expiry
    assert got["readonly"].permission == "r"


def test_access_policy_empty(tc):
    """A new table has no identifiers; setting {} clears them."""
    assert tc.get_table_access_policy() == {}
    tc.set_table_access_policy({"x": TableAccessPolicy(permission="r")})
    tc.set_table_access_policy({})
    assert tc.get_table_access_policy() == {}


def test_access_policy_null_policy(tc):
    """An identifier without a policy is stored as such."""
    tc.set_table_access_policy({"empty": None})
    got = tc.get_table_access_policy()
    assert list(got) == ["empty"]


def test_access_policy_too_many(tc):
    """Six identifiers: 400 InvalidXmlDocument, which the SDK turns into
    a ValueError (§3.5)."""
    with pytest.raises(ValueError):
        tc.set_table_access_policy({"id%d" % i: TableAccessPolicy(
            permission="r") for i in range(6)})


def test_access_policy_missing_table(svc):
    """ACL of a missing table: 404."""
    t = svc.get_table_client(tname("aclmiss"))
    raises(lambda: t.get_table_access_policy(), 404, None,
           ResourceNotFoundError)


# ================================================================ service
def test_service_properties_get(svc):
    """get_service_properties returns logging, metrics and CORS."""
    p = svc.get_service_properties()
    assert {"analytics_logging", "hour_metrics", "minute_metrics",
            "cors"} <= set(p)
    assert isinstance(p["cors"], list)


def test_service_properties_set_roundtrip(svc):
    """set_service_properties (202) then get returns the new values;
    sections not sent keep their values (§3.6)."""
    svc.set_service_properties(
        analytics_logging=TableAnalyticsLogging(
            read=True, write=True, delete=False,
            retention_policy=TableRetentionPolicy(enabled=True, days=5)),
        hour_metrics=TableMetrics(
            enabled=True, include_apis=True,
            retention_policy=TableRetentionPolicy(enabled=True, days=3)),
        minute_metrics=TableMetrics(enabled=False))
    p = svc.get_service_properties()
    lg = p["analytics_logging"]
    assert (lg.read, lg.write, lg.delete) == (True, True, False)
    assert lg.retention_policy.enabled and lg.retention_policy.days == 5
    assert p["hour_metrics"].enabled and p["hour_metrics"].include_apis
    assert p["hour_metrics"].retention_policy.days == 3
    assert p["minute_metrics"].enabled is False
    # Only CORS sent: logging stays.
    svc.set_service_properties(cors=[TableCorsRule(["https://a.example"],
                                                   ["GET"])])
    p = svc.get_service_properties()
    assert p["analytics_logging"].read is True
    svc.set_service_properties(cors=[])


def test_service_properties_cors_roundtrip(svc):
    """CORS rules round-trip."""
    rules = [TableCorsRule(["https://a.example", "https://b.example"],
                           ["GET", "PUT"], max_age_in_seconds=60,
                           exposed_headers=["x-ms-meta-*"],
                           allowed_headers=["x-ms-meta-data*", "x-ms-abc"]),
             TableCorsRule(["*"], ["MERGE"])]
    svc.set_service_properties(cors=rules)
    got = svc.get_service_properties()["cors"]
    assert len(got) == 2
    assert got[0].allowed_origins == ["https://a.example",
                                      "https://b.example"]
    assert got[0].allowed_methods == ["GET", "PUT"]
    assert got[0].max_age_in_seconds == 60
    assert got[0].exposed_headers == ["x-ms-meta-*"]
    assert got[0].allowed_headers == ["x-ms-meta-data*", "x-ms-abc"]
    assert got[1].allowed_origins == ["*"]


def test_service_properties_too_many_cors(svc):
    """Six CORS rules: 400 InvalidXmlDocument (§9)."""
    raises(lambda: svc.set_service_properties(
        cors=[TableCorsRule(["*"], ["GET"])] * 6), 400, "InvalidXmlDocument")


def test_service_stats(svc):
    """get_service_stats (secondary endpoint) reports geo-replication
    status (§3.7)."""
    st = svc.get_service_stats()
    assert st["geo_replication"]["status"] in ("live", "bootstrap",
                                               "unavailable")


# ================================================================ SAS
def sas_client(cluster, table, token):
    return TableClient(cluster.table_endpoint, table,
                       credential=AzureSasCredential(token))


def future(hours=1):
    return datetime.datetime.now(UTC) + datetime.timedelta(hours=hours)


def test_table_sas_read(cluster, cred, tc):
    """A read-only table SAS (generate_table_sas) can get and query."""
    tc.create_entity({"PartitionKey": "p", "RowKey": "r", "v": 1})
    tok = generate_table_sas(cred, tc.table_name,
                             permission=TableSasPermissions(read=True),
                             expiry=future())
    s = sas_client(cluster, tc.table_name, tok)
    assert s.get_entity("p", "r")["v"] == 1
    assert len(list(s.query_entities("v eq 1"))) == 1


def test_table_sas_read_cannot_write(cluster, cred, tc):
    """A read-only SAS cannot insert: 403 AuthorizationPermissionMismatch."""
    tok = generate_table_sas(cred, tc.table_name,
                             permission=TableSasPermissions(read=True),
                             expiry=future())
    s = sas_client(cluster, tc.table_name, tok)
    raises(lambda: s.create_entity({"PartitionKey": "p", "RowKey": "r"}),
           403, "AuthorizationPermissionMismatch")
    assert list(tc.list_entities()) == []


def test_table_sas_add_update_delete(cluster, cred, tc):
    """A raud SAS can insert, upsert, update and delete."""
    tok = generate_table_sas(cred, tc.table_name,
                             permission=TableSasPermissions(
                                 read=True, add=True, update=True,
                                 delete=True),
                             expiry=future())
    s = sas_client(cluster, tc.table_name, tok)
    s.create_entity({"PartitionKey": "p", "RowKey": "r", "v": 1})
    s.upsert_entity({"PartitionKey": "p", "RowKey": "r", "v": 2})
    s.update_entity({"PartitionKey": "p", "RowKey": "r", "v": 3})
    assert s.get_entity("p", "r")["v"] == 3
    s.delete_entity("p", "r")
    assert list(tc.list_entities()) == []


def test_table_sas_expired(cluster, cred, tc):
    """An expired SAS: 403 AuthenticationFailed."""
    tok = generate_table_sas(
        cred, tc.table_name, permission=TableSasPermissions(read=True),
        start=datetime.datetime.now(UTC) - datetime.timedelta(hours=2),
        expiry=datetime.datetime.now(UTC) - datetime.timedelta(hours=1))
    s = sas_client(cluster, tc.table_name, tok)
    raises(lambda: list(s.list_entities()), 403, "AuthenticationFailed")


def test_table_sas_wrong_table(cluster, cred, svc, tc):
    """A SAS for table A used on table B: 403."""
    other = svc.create_table(tname("other"))
    tok = generate_table_sas(cred, tc.table_name,
                             permission=TableSasPermissions(read=True),
                             expiry=future())
    s = sas_client(cluster, other.table_name, tok)
    raises(lambda: list(s.list_entities()), 403, None)


def test_table_sas_bad_signature(cluster, tc):
    """A SAS signed with another key: 403 AuthenticationFailed."""
    bad = AzureNamedKeyCredential(cluster.account,
                                  base64.b64encode(b"k" * 64).decode())
    tok = generate_table_sas(bad, tc.table_name,
                             permission=TableSasPermissions(read=True),
                             expiry=future())
    s = sas_client(cluster, tc.table_name, tok)
    raises(lambda: list(s.list_entities()), 403, "AuthenticationFailed")


def test_table_sas_partition_range(cluster, cred, tc):
    """spk/epk limit a SAS to a key range: point reads inside work,
    outside get 403 AuthorizationFailure; a query sees only the range
    (§7.3)."""
    for pk in ("a", "m", "z"):
        tc.create_entity({"PartitionKey": pk, "RowKey": "r"})
    tok = generate_table_sas(cred, tc.table_name,
                             permission=TableSasPermissions(read=True),
                             expiry=future(), start_pk="b", end_pk="n")
    s = sas_client(cluster, tc.table_name, tok)
    assert s.get_entity("m", "r")["PartitionKey"] == "m"
    raises(lambda: s.get_entity("z", "r"), 403, "AuthorizationFailure")
    assert keys_of(s.list_entities()) == [("m", "r")]


def test_table_sas_stored_policy(cluster, cred, tc):
    """A SAS naming a stored access policy (si) takes its permissions and
    expiry from the table ACL (§7.3)."""
    tc.create_entity({"PartitionKey": "p", "RowKey": "r"})
    tc.set_table_access_policy({"ro": TableAccessPolicy(
        permission="r", expiry=future(),
        start=datetime.datetime.now(UTC) - datetime.timedelta(minutes=5))})
    tok = generate_table_sas(cred, tc.table_name, policy_id="ro")
    s = sas_client(cluster, tc.table_name, tok)
    assert s.get_entity("p", "r")["RowKey"] == "r"
    raises(lambda: s.create_entity({"PartitionKey": "p", "RowKey": "s"}),
           403, "AuthorizationPermissionMismatch")


def test_table_sas_unknown_policy(cluster, cred, tc):
    """A SAS naming a policy that does not exist: 403."""
    tok = generate_table_sas(cred, tc.table_name, policy_id="nosuch")
    s = sas_client(cluster, tc.table_name, tok)
    raises(lambda: list(s.list_entities()), 403, None)


def test_table_sas_batch(cluster, cred, tc):
    """A transaction through a SAS needs the union of its permissions."""
    tok = generate_table_sas(cred, tc.table_name,
                             permission=TableSasPermissions(add=True),
                             expiry=future())
    s = sas_client(cluster, tc.table_name, tok)
    s.submit_transaction([("create", {"PartitionKey": "b", "RowKey": "1"})])
    raises(lambda: s.submit_transaction(
        [("delete", {"PartitionKey": "b", "RowKey": "1"})]), 403, None)
    assert keys_of(tc.list_entities()) == [("b", "1")]


def test_account_sas_entities(cluster, cred, tc):
    """An account SAS (ss=t, srt=o, sp=ra) reads and inserts entities, and
    cannot delete them (403 AuthorizationPermissionMismatch)."""
    tok = generate_account_sas(cred, ResourceTypes(object=True),
                               AccountSasPermissions(read=True, add=True),
                               expiry=future())
    s = sas_client(cluster, tc.table_name, tok)
    s.create_entity({"PartitionKey": "p", "RowKey": "r"})
    assert s.get_entity("p", "r")["RowKey"] == "r"
    raises(lambda: s.delete_entity("p", "r"), 403,
           "AuthorizationPermissionMismatch")


def test_account_sas_resource_type_mismatch(cluster, cred, tc):
    """An account SAS for the service level only (srt=s) cannot read
    entities: 403 AuthorizationResourceTypeMismatch."""
    tc.create_entity({"PartitionKey": "p", "RowKey": "r"})
    tok = generate_account_sas(cred, ResourceTypes(service=True),
                               AccountSasPermissions(read=True),
                               expiry=future())
    s = sas_client(cluster, tc.table_name, tok)
    raises(lambda: s.get_entity("p", "r"), 403,
           "AuthorizationResourceTypeMismatch")


def test_account_sas_service_properties(cluster, cred):
    """An account SAS with srt=s, sp=r reads service properties."""
    tok = generate_account_sas(cred, ResourceTypes(service=True),
                               AccountSasPermissions(read=True),
                               expiry=future())
    s = TableServiceClient(cluster.table_endpoint,
                           credential=AzureSasCredential(tok))
    assert "cors" in s.get_service_properties()


# ================================================================ auth
def test_wrong_key(cluster, tc):
    """A client with the wrong key: 403 AuthenticationFailed
    (ClientAuthenticationError) on every operation kind."""
    bad = cluster.table_service_client(
        key=base64.b64encode(b"\x07" * 64).decode())
    bt = bad.get_table_client(tc.table_name)
    for fn in (lambda: list(bad.list_tables()),
               lambda: bad.create_table(tname("nope")),
               lambda: bt.create_entity({"PartitionKey": "p",
                                         "RowKey": "r"}),
               lambda: bt.get_entity("p", "r"),
               lambda: list(bt.list_entities())):
        raises(fn, 403, "AuthenticationFailed")
    assert list(tc.list_entities()) == []


def test_wrong_account_name(cluster):
    """A credential for an unknown account: 403 AuthenticationFailed."""
    s = TableServiceClient(cluster.table_endpoint,
                           credential=AzureNamedKeyCredential(
                               "nosuchaccount", cluster.key))
    raises(lambda: list(s.list_tables()), 403, None)


def test_api_versions(cluster, tc):
    """The SDK's selectable API versions (§11) all work."""
    for v in ("2019-02-02", "2019-07-07", "2020-12-06"):
        s = TableServiceClient.from_connection_string(
            cluster.connection_string, api_version=v)
        t = s.get_table_client(tc.table_name)
        t.upsert_entity({"PartitionKey": "v", "RowKey": v})
        assert t.get_entity("v", v)["RowKey"] == v


# ================================================================ concurrency
def test_concurrent_writers_distinct_keys(cluster, tc):
    """16 threads insert 25 entities each: all 400 land, in order."""
    name = tc.table_name

    def work(t):
        c = cluster.table_service_client().get_table_client(name)
        for j in range(25):
            c.create_entity({"PartitionKey": "p%d" % (t % 4),
                             "RowKey": "%02d-%02d" % (t, j), "t": t})
        return t

    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        assert sorted(ex.map(work, range(16))) == list(range(16))
    keys = keys_of(tc.list_entities())
    assert len(keys) == 400 and keys == sorted(keys)


def test_concurrent_conditional_increments(cluster, tc):
    """8 threads increment one counter with optimistic concurrency
    (read, update with IfNotModified, retry on 412): no update is lost."""
    tc.create_entity({"PartitionKey": "c", "RowKey": "c", "n": 0})
    name, per_thread = tc.table_name, 10
    conflicts = []

    def work(_):
        c = cluster.table_service_client().get_table_client(name)
        done = 0
        while done < per_thread:
            e = c.get_entity("c", "c")
            e["n"] += 1
            try:
                c.update_entity(e, etag=e.metadata["etag"],
                                match_condition=MatchConditions.IfNotModified)
                done += 1
            except ResourceModifiedError as err:
                assert code_of(err) == "UpdateConditionNotSatisfied"
                conflicts.append(1)
        return done

    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        assert sum(ex.map(work, range(8))) == 8 * per_thread
    assert tc.get_entity("c", "c")["n"] == 8 * per_thread


def test_concurrent_upserts_same_entity(cluster, tc):
    """Concurrent replace-upserts of one entity leave one writer's whole
    entity (never a mix of two), and every write got its own ETag."""
    name = tc.table_name

    def work(t):
        c = cluster.table_service_client().get_table_client(name)
        tags = []
        for j in range(10):
            tags.append(c.upsert_entity(
                {"PartitionKey": "u", "RowKey": "u", "a": t, "b": t, "j": j},
                mode=UpdateMode.REPLACE)["etag"])
        return tags

    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        tags = [t for ts in ex.map(work, range(8)) for t in ts]
    e = tc.get_entity("u", "u")
    assert e["a"] == e["b"] and e["j"] == 9
    # Two writes to one entity never share a Timestamp/ETag (§4.3).
    assert len(set(tags)) == len(tags) == 80
    assert e.metadata["etag"] in tags


def test_concurrent_creates_same_key(cluster, tc):
    """8 threads create the same key: exactly one succeeds, the others get
    409 EntityAlreadyExists."""
    name = tc.table_name

    def work(t):
        c = cluster.table_service_client().get_table_client(name)
        try:
            c.create_entity({"PartitionKey": "x", "RowKey": "x", "t": t})
            return "ok"
        except ResourceExistsError as err:
            return code_of(err)

    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        res = list(ex.map(work, range(8)))
    assert res.count("ok") == 1, res
    assert res.count("EntityAlreadyExists") == 7, res


def test_cluster_healthy_at_end(cluster, svc):
    """After everything above, a plain round trip still works."""
    t = svc.create_table(tname("end"))
    t.create_entity({"PartitionKey": "a", "RowKey": "b"})
    assert keys_of(t.list_entities()) == [("a", "b")]
    time.sleep(0)
