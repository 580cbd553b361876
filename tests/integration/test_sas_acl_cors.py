"""Shared access signatures, table ACLs (stored access policies),
service properties and stats, CORS and the table-deletion grace period,
driven with the official Python SDK (azure-data-tables 12.4.2) and, where
the SDK hides the wire (preflights, error bodies, limits), raw HTTP.

The cluster of this module runs the master with a short deletion grace
period (--delete-grace-ms 8000) so the TableBeingDeleted test does not wait
30 s. Expectations come from docs/table-api-spec.md §3.3-§3.8, §7, §8.
"""

import base64
import datetime
import email.utils
import hashlib
import hmac
import http.client
import os
import sys
import time
import urllib.parse
import uuid
import xml.etree.ElementTree as ET

import pytest
from azure.core.credentials import AzureNamedKeyCredential, AzureSasCredential
from azure.core.exceptions import (ClientAuthenticationError,
                                   HttpResponseError, ResourceNotFoundError)
from azure.data.tables import (AccountSasPermissions, ResourceTypes,
                               TableAccessPolicy,
                               TableAnalyticsLogging, TableClient,
                               TableCorsRule, TableMetrics,
                               TableRetentionPolicy, TableSasPermissions,
                               TableServiceClient, UpdateMode,
                               generate_account_sas, generate_table_sas)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rtcluster import Cluster  # noqa: E402

GRACE_MS = 8000
TABLE = "sastable"
UTC = datetime.timezone.utc
PKS = ["a", "b", "c", "d", "e"]


# ------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """The conftest cluster, with a short deletion grace period."""
    c = Cluster(tmp_path_factory.mktemp("cluster"), n_ps=3,
                extra_args={"master": ["--delete-grace-ms", str(GRACE_MS)]})
    sys.stderr.write("\n[rtcluster] logs in %s\n" % c.logdir)
    c.start()
    yield c
    c.stop(check=False)
    c.check_sanitizers()


@pytest.fixture(scope="module")
def svc(cluster):
    return cluster.table_service_client()


@pytest.fixture(scope="module")
def table(svc):
    """TABLE with rows (pk, "1".."3") for every pk in PKS."""
    tc = svc.create_table(TABLE)
    for pk in PKS:
        for rk in ("1", "2", "3"):
            tc.create_entity({"PartitionKey": pk, "RowKey": rk, "v": pk + rk})
    return tc


@pytest.fixture(scope="module")
def cred(cluster):
    return AzureNamedKeyCredential(cluster.account, cluster.key)


# ------------------------------------------------------------ helpers
def now():
    return datetime.datetime.now(UTC)


def code_of(err):
    """The Azure error code of an SDK exception (header fallback)."""
    c = getattr(err, "error_code", None)
    c = getattr(c, "value", c)
    if c is None and getattr(err, "response", None) is not None:
        c = err.response.headers.get("x-ms-error-code")
    return c


def status_of(err):
    r = getattr(err, "response", None)
    return getattr(r, "status_code", None) or getattr(err, "status_code", None)


def sas_table(cluster, sas, name=TABLE):
    return TableClient(endpoint=cluster.table_endpoint, table_name=name,
                       credential=AzureSasCredential(sas), retry_total=0)


def sas_service(cluster, sas):
    return TableServiceClient(endpoint=cluster.table_endpoint,
                              credential=AzureSasCredential(sas),
                              retry_total=0)


def table_sas(cred, perm, name=TABLE, **kw):
    kw.setdefault("expiry", now() + datetime.timedelta(hours=1))
    return generate_table_sas(cred, name,
                              permission=TableSasPermissions.from_string(perm)
                              if perm else None, **kw)


def expect_denied(fn, code, status=403):
    with pytest.raises(HttpResponseError) as ei:
        fn()
    assert status_of(ei.value) == status, ei.value
    assert code_of(ei.value) == code, ei.value
    return ei.value


def http_date():
    return email.utils.format_datetime(now(), usegmt=True)


def shared_key(cluster, verb, target, content_type=""):
    """SharedKey (Table) Authorization for @target (spec §7.1, §7.2)."""
    path, _, query = target.partition("?")
    res = "/" + cluster.account + path
    for k, v in urllib.parse.parse_qsl(query, keep_blank_values=True):
        if k == "comp":
            res += "?comp=" + v
            break
    date = http_date()
    sts = "\n".join([verb, "", content_type, date, res])
    mac = hmac.new(base64.b64decode(cluster.key), sts.encode(),
                   hashlib.sha256).digest()
    return date, "SharedKey %s:%s" % (cluster.account,
                                      base64.b64encode(mac).decode())


def raw(cluster, verb, target, body=b"", headers=None, sign=True,
        content_type=""):
    """One request on a fresh connection: (status, headers dict, body)."""
    h = {"x-ms-version": "2019-02-02"}
    if sign:
        date, auth = shared_key(cluster, verb, target, content_type)
        h["x-ms-date"] = date
        h["Authorization"] = auth
    if content_type:
        h["Content-Type"] = content_type
    h.update(headers or {})
    conn = http.client.HTTPConnection("127.0.0.1", cluster.fe_port,
                                      timeout=30)
    try:
        conn.request(verb, target, body=body, headers=h)
        r = conn.getresponse()
        data = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data
    finally:
        conn.close()


def storage_error(body):
    """(Code, Message) of a storage XML error body (spec §8.1)."""
    root = ET.fromstring(body)
    assert root.tag == "Error", body
    return root.findtext("Code"), root.findtext("Message")


def acct_path(cluster, rest):
    return "/" + cluster.account + rest


# ------------------------------------------------------------ service SAS
def test_sas_read_allows_query_and_get(cluster, table, cred):
    """sp=r: Query Entities and Get Entity work."""
    tc = sas_table(cluster, table_sas(cred, "r"))
    got = sorted((e["PartitionKey"], e["RowKey"]) for e in tc.list_entities())
    assert len(got) == len(PKS) * 3
    assert tc.get_entity("b", "2")["v"] == "b2"


def test_sas_read_denies_writes(cluster, table, cred):
    """sp=r: insert, update, upsert and delete are 403
    AuthorizationPermissionMismatch."""
    tc = sas_table(cluster, table_sas(cred, "r"))
    expect_denied(lambda: tc.create_entity({"PartitionKey": "x",
                                            "RowKey": "1"}),
                  "AuthorizationPermissionMismatch")
    expect_denied(lambda: tc.update_entity({"PartitionKey": "a",
                                            "RowKey": "1", "v": "n"}),
                  "AuthorizationPermissionMismatch")
    expect_denied(lambda: tc.upsert_entity({"PartitionKey": "a",
                                            "RowKey": "1"}),
                  "AuthorizationPermissionMismatch")
    expect_denied(lambda: tc.delete_entity("a", "1"),
                  "AuthorizationPermissionMismatch")


def test_sas_add_only(cluster, table, cred):
    """sp=a: insert works; reading and updating do not."""
    tc = sas_table(cluster, table_sas(cred, "a"))
    tc.create_entity({"PartitionKey": "f", "RowKey": "add"})
    expect_denied(lambda: tc.get_entity("f", "add"),
                  "AuthorizationPermissionMismatch")
    expect_denied(lambda: list(tc.list_entities()),
                  "AuthorizationPermissionMismatch")
    expect_denied(lambda: tc.update_entity({"PartitionKey": "f",
                                            "RowKey": "add", "x": 1}),
                  "AuthorizationPermissionMismatch")
    table.delete_entity("f", "add")


def test_sas_update_only(cluster, table, cred):
    """sp=u: update and merge of existing entities work; the upserts need
    a+u (spec §7.3)."""
    tc = sas_table(cluster, table_sas(cred, "u"))
    tc.update_entity({"PartitionKey": "a", "RowKey": "1", "v": "a1",
                      "u": 1}, mode=UpdateMode.MERGE)
    tc.update_entity({"PartitionKey": "a", "RowKey": "1", "v": "a1"},
                     mode=UpdateMode.REPLACE)
    assert "u" not in table.get_entity("a", "1")
    expect_denied(lambda: tc.upsert_entity({"PartitionKey": "a",
                                            "RowKey": "1", "v": "a1"}),
                  "AuthorizationPermissionMismatch")


def test_sas_add_update_upserts(cluster, table, cred):
    """sp=au: both upsert modes work."""
    tc = sas_table(cluster, table_sas(cred, "au"))
    tc.upsert_entity({"PartitionKey": "f", "RowKey": "up", "n": 1},
                     mode=UpdateMode.MERGE)
    tc.upsert_entity({"PartitionKey": "f", "RowKey": "up", "n": 2},
                     mode=UpdateMode.REPLACE)
    assert table.get_entity("f", "up")["n"] == 2
    table.delete_entity("f", "up")


def test_sas_delete_only(cluster, table, cred):
    """sp=d: delete works, read does not."""
    table.create_entity({"PartitionKey": "f", "RowKey": "del"})
    tc = sas_table(cluster, table_sas(cred, "d"))
    tc.delete_entity("f", "del")
    with pytest.raises(ResourceNotFoundError):
        table.get_entity("f", "del")
    expect_denied(lambda: tc.get_entity("a", "1"),
                  "AuthorizationPermissionMismatch")


def test_sas_other_table(cluster, table, cred, svc):
    """A SAS for another table is AuthenticationFailed (tn check)."""
    svc.create_table_if_not_exists("sasother")
    tc = sas_table(cluster, table_sas(cred, "raud", name="sasother"))
    with pytest.raises(ClientAuthenticationError) as ei:
        tc.get_entity("a", "1")
    assert code_of(ei.value) == "AuthenticationFailed"
    # The same token used on its own table works (case-insensitive tn).
    tc2 = sas_table(cluster, table_sas(cred, "raud", name="SasOther"),
                    name="sasother")
    assert list(tc2.list_entities()) == []


def test_sas_expired(cluster, table, cred):
    """An expired SAS is 403 AuthenticationFailed."""
    sas = table_sas(cred, "r", start=now() - datetime.timedelta(hours=2),
                    expiry=now() - datetime.timedelta(hours=1))
    with pytest.raises(ClientAuthenticationError) as ei:
        sas_table(cluster, sas).get_entity("a", "1")
    assert code_of(ei.value) == "AuthenticationFailed"


def test_sas_not_yet_valid(cluster, table, cred):
    """A SAS whose start is in the future is 403 AuthenticationFailed."""
    sas = table_sas(cred, "r", start=now() + datetime.timedelta(hours=1),
                    expiry=now() + datetime.timedelta(hours=2))
    with pytest.raises(ClientAuthenticationError) as ei:
        sas_table(cluster, sas).get_entity("a", "1")
    assert code_of(ei.value) == "AuthenticationFailed"


def test_sas_tampered(cluster, table, cred):
    """Changing a signed field (sp=r -> sp=rd) or the signature is 403
    AuthenticationFailed; so is a token signed with another key."""
    sas = table_sas(cred, "r")
    bad = sas.replace("sp=r&", "sp=rd&")
    assert bad != sas
    with pytest.raises(ClientAuthenticationError):
        sas_table(cluster, bad).delete_entity("a", "1")
    other = AzureNamedKeyCredential(cluster.account,
                                    base64.b64encode(b"k" * 64).decode())
    with pytest.raises(ClientAuthenticationError):
        sas_table(cluster, table_sas(other, "r")).get_entity("a", "1")


def test_sas_https_only(cluster, table, cred):
    """spr=https over plain HTTP is 403 AuthorizationProtocolMismatch."""
    tc = sas_table(cluster, table_sas(cred, "r", protocol="https"))
    expect_denied(lambda: tc.get_entity("a", "1"),
                  "AuthorizationProtocolMismatch")


@pytest.mark.parametrize("op,need", [
    ("insert", "a"), ("get", "r"), ("query", "r"), ("replace", "u"),
    ("merge", "u"), ("upsert_replace", "au"), ("upsert_merge", "au"),
    ("delete", "d")])
def test_sas_https_http_start_now(cluster, cred, svc, op, need):
    """A service SAS with spr=https,http over plain HTTP whose st is "now"
    to the millisecond (what the JS tests of Azurite sign) is valid at
    once for each operation with its permission; each other single letter
    is 403 AuthorizationPermissionMismatch."""
    name = "SasNow" + uuid.uuid4().hex[:8]
    tc = svc.create_table(name)
    runs = {
        "insert": lambda t: t.create_entity({"PartitionKey": "p",
                                             "RowKey": "n"}),
        "get": lambda t: t.get_entity("p", "r"),
        "query": lambda t: list(t.query_entities("RowKey eq 'r'")),
        "replace": lambda t: t.update_entity(
            {"PartitionKey": "p", "RowKey": "r", "v": 2}, UpdateMode.REPLACE),
        "merge": lambda t: t.update_entity(
            {"PartitionKey": "p", "RowKey": "r", "v": 2}, UpdateMode.MERGE),
        "upsert_replace": lambda t: t.upsert_entity(
            {"PartitionKey": "p", "RowKey": "u"}, UpdateMode.REPLACE),
        "upsert_merge": lambda t: t.upsert_entity(
            {"PartitionKey": "p", "RowKey": "r", "w": 3}, UpdateMode.MERGE),
        "delete": lambda t: t.delete_entity("p", "r"),
    }

    def sas(perm):
        start = now().isoformat(timespec="milliseconds").replace("+00:00", "Z")
        return generate_table_sas(
            cred, name, permission=TableSasPermissions.from_string(perm),
            start=start, expiry=now() + datetime.timedelta(minutes=5),
            protocol="https,http")

    try:
        for letter in "raud":
            if letter == need:
                continue
            tc.upsert_entity({"PartitionKey": "p", "RowKey": "r", "v": 1})
            expect_denied(lambda: runs[op](sas_table(cluster, sas(letter),
                                                     name)),
                          "AuthorizationPermissionMismatch")
        tc.upsert_entity({"PartitionKey": "p", "RowKey": "r", "v": 1})
        assert "spr=https%2Chttp" in sas(need) and "st=" in sas(need)
        runs[op](sas_table(cluster, sas(need), name))
    finally:
        svc.delete_table(name)


def test_service_sas_cannot_touch_tables(cluster, table, cred):
    """A service SAS can neither list, create nor delete tables: 403
    AuthorizationResourceTypeMismatch (spec §7.3)."""
    s = sas_service(cluster, table_sas(cred, "raud"))
    expect_denied(lambda: list(s.list_tables()),
                  "AuthorizationResourceTypeMismatch")
    expect_denied(lambda: s.create_table("sasnope"),
                  "AuthorizationResourceTypeMismatch")
    expect_denied(lambda: s.get_service_properties(),
                  "AuthorizationResourceTypeMismatch")


def test_sas_key_range_point_ops(cluster, table, cred):
    """spk/srk..epk/erk: point operations inside the range work; outside
    they are 403 AuthorizationFailure."""
    tc = sas_table(cluster, table_sas(cred, "raud", start_pk="b",
                                      start_rk="2", end_pk="d", end_rk="2"))
    assert tc.get_entity("b", "2")["v"] == "b2"
    assert tc.get_entity("c", "3")["v"] == "c3"
    assert tc.get_entity("d", "2")["v"] == "d2"
    for pk, rk in (("b", "1"), ("a", "3"), ("d", "3"), ("e", "1")):
        expect_denied(lambda: tc.get_entity(pk, rk), "AuthorizationFailure")
    expect_denied(lambda: tc.create_entity({"PartitionKey": "e",
                                            "RowKey": "9"}),
                  "AuthorizationFailure")
    tc.create_entity({"PartitionKey": "c", "RowKey": "9"})
    tc.delete_entity("c", "9")


def test_sas_key_range_query(cluster, table, cred):
    """A query with a key-range SAS returns exactly the entities inside the
    range (the query is intersected with it), also page by page."""
    tc = sas_table(cluster, table_sas(cred, "r", start_pk="b", start_rk="2",
                                      end_pk="d", end_rk="2"))
    want = [("b", "2"), ("b", "3"), ("c", "1"), ("c", "2"), ("c", "3"),
            ("d", "1"), ("d", "2")]
    got = [(e["PartitionKey"], e["RowKey"]) for e in tc.list_entities()]
    assert got == want
    pages = tc.list_entities(results_per_page=2).by_page()
    got = [(e["PartitionKey"], e["RowKey"]) for p in pages for e in p]
    assert got == want
    # A filter inside the range narrows further.
    got = [(e["PartitionKey"], e["RowKey"]) for e in
           tc.query_entities("PartitionKey eq 'c'")]
    assert got == [("c", "1"), ("c", "2"), ("c", "3")]


def test_sas_batch(cluster, table, cred):
    """An entity group transaction needs the union of its operations'
    permissions: r-only is refused, a+d works."""
    ops = [("create", {"PartitionKey": "g", "RowKey": "1"}),
           ("create", {"PartitionKey": "g", "RowKey": "2"})]
    with pytest.raises(HttpResponseError) as ei:
        sas_table(cluster, table_sas(cred, "r")).submit_transaction(ops)
    assert status_of(ei.value) == 403
    tc = sas_table(cluster, table_sas(cred, "ad"))
    tc.submit_transaction(ops)
    tc.submit_transaction([("delete", {"PartitionKey": "g", "RowKey": "1"}),
                           ("delete", {"PartitionKey": "g", "RowKey": "2"})])
    assert list(table.query_entities("PartitionKey eq 'g'")) == []


# ------------------------------------------------------------ ACLs
def test_acl_roundtrip(table):
    """Set Table ACL then Get Table ACL gives back every policy, including
    one without AccessPolicy; an empty set clears it."""
    start = datetime.datetime(2024, 1, 1, tzinfo=UTC)
    expiry = datetime.datetime(2035, 2, 1, tzinfo=UTC)
    table.set_table_access_policy({
        "p1": TableAccessPolicy(start=start, expiry=expiry,
                                permission="raud"),
        "p2": TableAccessPolicy(permission="r"),
        "p3": None,
    })
    acl = table.get_table_access_policy()
    assert set(acl) == {"p1", "p2", "p3"}
    assert acl["p1"].permission == "raud"
    assert acl["p1"].start == start and acl["p1"].expiry == expiry
    assert acl["p2"].permission == "r" and acl["p2"].start is None
    assert acl["p3"] is None
    table.set_table_access_policy({})
    assert table.get_table_access_policy() == {}


def test_acl_stored_policy_sas(cluster, table, cred):
    """A SAS naming a stored policy (si) gets its permissions and expiry
    from the table ACL."""
    table.set_table_access_policy({"readers": TableAccessPolicy(
        permission="r", expiry=now() + datetime.timedelta(hours=1))})
    tc = sas_table(cluster, generate_table_sas(cred, TABLE,
                                               policy_id="readers"))
    assert tc.get_entity("a", "2")["v"] == "a2"
    expect_denied(lambda: tc.create_entity({"PartitionKey": "z",
                                            "RowKey": "z"}),
                  "AuthorizationPermissionMismatch")


def test_acl_stored_policy_conflict_and_unknown(cluster, table, cred):
    """A field in both the SAS and its policy, an unknown policy id and a
    removed policy are 403 AuthenticationFailed."""
    table.set_table_access_policy({"readers": TableAccessPolicy(
        permission="r", expiry=now() + datetime.timedelta(hours=1))})
    both = generate_table_sas(cred, TABLE, policy_id="readers",
                              permission="r")
    with pytest.raises(ClientAuthenticationError):
        sas_table(cluster, both).get_entity("a", "1")
    unknown = generate_table_sas(cred, TABLE, policy_id="nobody")
    with pytest.raises(ClientAuthenticationError):
        sas_table(cluster, unknown).get_entity("a", "1")
    good = generate_table_sas(cred, TABLE, policy_id="readers")
    assert sas_table(cluster, good).get_entity("a", "1")
    table.set_table_access_policy({})
    with pytest.raises(ClientAuthenticationError):
        sas_table(cluster, good).get_entity("a", "1")


def test_acl_policy_narrowed_applies_at_once(cluster, table, cred):
    """A token naming a stored policy follows the policy as it is now: once
    the same id is set again without add, the next insert through the
    same token is refused and writes nothing."""
    pol = {"writers": TableAccessPolicy(
        permission="raud", expiry=now() + datetime.timedelta(hours=1))}
    table.set_table_access_policy(pol)
    tc = sas_table(cluster, generate_table_sas(cred, TABLE,
                                               policy_id="writers"))
    tc.create_entity({"PartitionKey": "nar", "RowKey": "1"})
    pol["writers"].permission = "r"
    table.set_table_access_policy(pol)
    expect_denied(lambda: tc.create_entity({"PartitionKey": "nar",
                                            "RowKey": "2"}),
                  "AuthorizationPermissionMismatch")
    with pytest.raises(ResourceNotFoundError):
        table.get_entity("nar", "2")
    table.delete_entity("nar", "1")
    table.set_table_access_policy({})


def test_acl_expired_policy(cluster, table, cred):
    """A policy whose expiry has passed makes its SAS invalid."""
    table.set_table_access_policy({"old": TableAccessPolicy(
        permission="r", expiry=now() - datetime.timedelta(minutes=1))})
    sas = generate_table_sas(cred, TABLE, policy_id="old")
    with pytest.raises(ClientAuthenticationError):
        sas_table(cluster, sas).get_entity("a", "1")
    table.set_table_access_policy({})


def test_acl_limits_raw(cluster, table):
    """More than 5 identifiers, a 65-character id, a bad permission and
    malformed XML are 400 InvalidXmlDocument with a storage XML body."""
    def ids(n, idlen=4, perm="r"):
        return ("<?xml version='1.0' encoding='utf-8'?><SignedIdentifiers>" +
                "".join("<SignedIdentifier><Id>%s</Id><AccessPolicy>"
                        "<Permission>%s</Permission></AccessPolicy>"
                        "</SignedIdentifier>" % (str(i).zfill(idlen), perm)
                        for i in range(n)) +
                "</SignedIdentifiers>").encode()
    target = acct_path(cluster, "/%s?comp=acl" % TABLE)
    for body in (ids(6), ids(1, idlen=65), ids(1, perm="rw"),
                 b"<SignedIdentifiers><SignedIdentifier>",
                 b"not xml at all"):
        st, h, data = raw(cluster, "PUT", target, body=body,
                          content_type="application/xml")
        assert st == 400, (body, data)
        assert h["x-ms-error-code"] == "InvalidXmlDocument"
        assert storage_error(data)[0] == "InvalidXmlDocument"
    st, _, _ = raw(cluster, "PUT", target, body=ids(5, idlen=64),
                   content_type="application/xml")
    assert st == 204
    st, h, data = raw(cluster, "GET", target)
    assert st == 200 and h["content-type"].startswith("application/xml")
    assert len(ET.fromstring(data).findall("SignedIdentifier")) == 5
    st, _, _ = raw(cluster, "PUT", target, body=b"",
                   content_type="application/xml")
    assert st == 204


def test_acl_shared_key_only(cluster, table, cred):
    """Table ACLs are Shared Key only: any SAS gets 403."""
    tc = sas_table(cluster, table_sas(cred, "raud"))
    with pytest.raises(HttpResponseError) as ei:
        tc.get_table_access_policy()
    assert status_of(ei.value) == 403
    acc = generate_account_sas(cred, ResourceTypes.from_string("sco"),
                               AccountSasPermissions.from_string("rwdlacu"),
                               expiry=now() + datetime.timedelta(hours=1))
    with pytest.raises(HttpResponseError) as ei:
        sas_table(cluster, acc).set_table_access_policy({})
    assert status_of(ei.value) == 403


def test_acl_missing_table(svc):
    """ACL of a table that does not exist: 404 TableNotFound."""
    with pytest.raises(ResourceNotFoundError):
        svc.get_table_client("nosuchtable").get_table_access_policy()


# ------------------------------------------------------------ account SAS
def account_sas(cred, srt, sp, **kw):
    kw.setdefault("expiry", now() + datetime.timedelta(hours=1))
    return generate_account_sas(cred, ResourceTypes.from_string(srt),
                                AccountSasPermissions.from_string(sp), **kw)


def test_account_sas_list_tables(cluster, table, cred):
    """srt=s or c with sp=l lists tables; without l it is
    AuthorizationPermissionMismatch; srt=o is ResourceTypeMismatch."""
    for srt in ("s", "c"):
        names = [t.name for t in
                 sas_service(cluster, account_sas(cred, srt, "l"))
                 .list_tables()]
        assert TABLE in names
    expect_denied(lambda: list(sas_service(cluster, account_sas(
        cred, "sc", "r")).list_tables()), "AuthorizationPermissionMismatch")
    expect_denied(lambda: list(sas_service(cluster, account_sas(
        cred, "o", "l")).list_tables()), "AuthorizationResourceTypeMismatch")


def test_account_sas_create_delete_table(cluster, cred, svc):
    """srt=c with sp=c creates and with sp=d deletes a table; the wrong
    resource type or permission is refused."""
    name = "acct" + uuid.uuid4().hex[:8]
    expect_denied(lambda: sas_service(cluster, account_sas(cred, "o", "c"))
                  .create_table(name), "AuthorizationResourceTypeMismatch")
    expect_denied(lambda: sas_service(cluster, account_sas(cred, "c", "rl"))
                  .create_table(name), "AuthorizationPermissionMismatch")
    sas_service(cluster, account_sas(cred, "c", "c")).create_table(name)
    assert name in [t.name for t in svc.list_tables()]
    expect_denied(lambda: sas_service(cluster, account_sas(cred, "c", "c"))
                  .delete_table(name), "AuthorizationPermissionMismatch")
    sas_service(cluster, account_sas(cred, "c", "d")).delete_table(name)
    assert name not in [t.name for t in svc.list_tables()]


def test_account_sas_entities(cluster, table, cred):
    """srt=o: entity operations by their permission; srt=c cannot insert."""
    tc = sas_table(cluster, account_sas(cred, "o", "rau"))
    assert tc.get_entity("e", "3")["v"] == "e3"
    tc.upsert_entity({"PartitionKey": "h", "RowKey": "1"})
    expect_denied(lambda: tc.delete_entity("h", "1"),
                  "AuthorizationPermissionMismatch")
    sas_table(cluster, account_sas(cred, "o", "d")).delete_entity("h", "1")
    expect_denied(lambda: sas_table(cluster, account_sas(cred, "c", "a"))
                  .create_entity({"PartitionKey": "h", "RowKey": "2"}),
                  "AuthorizationResourceTypeMismatch")
    # Query Entities is an object-level operation ("Create an account
    # SAS"): srt=c is the wrong resource type even with r.
    assert len(list(sas_table(cluster, account_sas(cred, "o", "r"))
                    .query_entities("PartitionKey eq 'a'"))) == 3
    expect_denied(lambda: list(sas_table(cluster, account_sas(cred, "c", "r"))
                               .query_entities("PartitionKey eq 'a'")),
                  "AuthorizationResourceTypeMismatch")


@pytest.mark.parametrize("sp", ["c", "a", "w", "wac"])
def test_account_sas_create_table_each_permission(cluster, cred, svc, sp):
    """Create Table under srt=c takes Add, Create or Write (each alone)."""
    name = "acct" + sp + uuid.uuid4().hex[:8]
    sas_service(cluster, account_sas(cred, "c", sp)).create_table(name)
    assert name in [t.name for t in svc.list_tables()]
    svc.delete_table(name)


def test_account_sas_container_keyword(cluster, cred, svc):
    """ResourceTypes(container=True): azure-data-tables 12.4.2 has no such
    keyword and signs srt="" (AuthenticationFailed, like Azure); an SDK
    that knows it signs srt=c, which creates the table."""
    name = "acctkw" + uuid.uuid4().hex[:8]
    rt = ResourceTypes(container=True)
    sas = generate_account_sas(
        cred, rt, AccountSasPermissions(create=True, add=True, write=True),
        expiry=now() + datetime.timedelta(hours=1))
    if str(rt) == "":
        expect_denied(lambda: sas_service(cluster, sas).create_table(name),
                      "AuthenticationFailed")
    else:
        sas_service(cluster, sas).create_table(name)
        svc.delete_table(name)


# The rows of "Create an account SAS" for the Table service, each run with
# its resource type and permission (allowed), the right permission under
# every other resource type (ResourceTypeMismatch), and the right resource
# type with every other single permission (PermissionMismatch).
def _acct_ops(cluster, cred, svc):
    def fresh(tag):
        name = "acctm" + tag + uuid.uuid4().hex[:6]
        tc = svc.create_table(name)
        tc.create_entity({"PartitionKey": "p", "RowKey": "r", "v": 1})
        return name

    def get_props(sas):
        sas_service(cluster, sas).get_service_properties()

    def set_props(sas):
        sas_service(cluster, sas).set_service_properties(
            minute_metrics=TableMetrics())

    def stats(sas):
        # Stats answer on the -secondary account; only the gate matters.
        try:
            sas_service(cluster, sas).get_service_stats()
        except HttpResponseError as e:
            if status_of(e) == 403:
                raise

    def list_tables(sas):
        list(sas_service(cluster, sas).list_tables())

    def create_table(sas):
        sas_service(cluster, sas).create_table(
            "acctc" + uuid.uuid4().hex[:8])

    def delete_table(sas):
        sas_service(cluster, sas).delete_table(fresh("d"))

    def on_entity(fn):
        def run(sas):
            fn(sas_table(cluster, sas, fresh("e")))
        return run

    return [
        ("get service properties", "s", "r", get_props),
        ("set service properties", "s", "w", set_props),
        ("get service stats", "s", "r", stats),
        ("query tables", "c", "l", list_tables),
        ("create table", "c", "c", create_table),
        ("delete table", "c", "d", delete_table),
        ("query entities", "o", "r",
         on_entity(lambda t: list(t.query_entities("PartitionKey eq 'p'")))),
        ("get entity", "o", "r", on_entity(lambda t: t.get_entity("p", "r"))),
        ("insert entity", "o", "a", on_entity(
            lambda t: t.create_entity({"PartitionKey": "p", "RowKey": "n"}))),
        ("update entity", "o", "u", on_entity(lambda t: t.update_entity(
            {"PartitionKey": "p", "RowKey": "r", "v": 2}, UpdateMode.REPLACE))),
        ("merge entity", "o", "u", on_entity(lambda t: t.update_entity(
            {"PartitionKey": "p", "RowKey": "r", "v": 2}, UpdateMode.MERGE))),
        ("insert or replace", "o", "au", on_entity(lambda t: t.upsert_entity(
            {"PartitionKey": "p", "RowKey": "u"}, UpdateMode.REPLACE))),
        ("insert or merge", "o", "au", on_entity(lambda t: t.upsert_entity(
            {"PartitionKey": "p", "RowKey": "u"}, UpdateMode.MERGE))),
        ("delete entity", "o", "d",
         on_entity(lambda t: t.delete_entity("p", "r"))),
        ("batch insert+delete", "o", "ad", on_entity(
            lambda t: t.submit_transaction([
                ("create", {"PartitionKey": "p", "RowKey": "b"}),
                ("delete", {"PartitionKey": "p", "RowKey": "r"})]))),
    ]


def test_account_sas_matrix(cluster, cred, svc):
    """Every Table operation under an account SAS made by the Python SDK:
    allowed with its documented srt and sp, 403
    AuthorizationResourceTypeMismatch under the other resource types, 403
    AuthorizationPermissionMismatch with any other single permission (and
    with one of the two an upsert or the batch needs). Query Tables also takes srt=s (see frontend/README.md)."""
    for name, srt, sp, run in _acct_ops(cluster, cred, svc):
        run(account_sas(cred, srt, sp))
        accepted = "sc" if srt == "c" and sp == "l" else srt
        for other in "sco":
            if other in accepted:
                continue
            try:
                expect_denied(lambda: run(account_sas(cred, other, sp)),
                              "AuthorizationResourceTypeMismatch")
            except AssertionError as e:
                raise AssertionError("%s srt=%s: %s" % (name, other, e))
        for letter in "rwdlacup":
            # Each letter alone, also each of a pair needed together
            # (upserts: a and u; the batch: a and d).
            if (letter in sp and len(sp) == 1) or (
                    name == "create table" and letter in "aw"):
                continue
            try:
                expect_denied(lambda: run(account_sas(cred, srt, letter)),
                              "AuthorizationPermissionMismatch")
            except AssertionError as e:
                raise AssertionError("%s sp=%s: %s" % (name, letter, e))


def test_account_sas_service_properties(cluster, cred):
    """Service properties need srt=s: r to read, w to write."""
    s = sas_service(cluster, account_sas(cred, "s", "r"))
    assert "cors" in s.get_service_properties()
    expect_denied(lambda: s.set_service_properties(cors=[]),
                  "AuthorizationPermissionMismatch")
    sas_service(cluster, account_sas(cred, "s", "w")).set_service_properties(
        minute_metrics=TableMetrics())


def test_account_sas_wrong_service_and_ip(cluster, table, cred):
    """ss without t is AuthorizationServiceMismatch; an IP outside sip is
    AuthorizationSourceIPMismatch."""
    sas = account_sas(cred, "o", "r")
    # Re-sign with ss=b by hand (the SDK always sends ss=t).
    q = dict(urllib.parse.parse_qsl(sas))
    q["ss"] = "b"
    sts = "\n".join([cluster.account, q["sp"], q["ss"], q["srt"],
                     q.get("st", ""), q["se"], "", "", q["sv"], ""])
    q["sig"] = base64.b64encode(hmac.new(
        base64.b64decode(cluster.key), sts.encode(),
        hashlib.sha256).digest()).decode()
    expect_denied(lambda: sas_table(cluster, urllib.parse.urlencode(q))
                  .get_entity("a", "1"), "AuthorizationServiceMismatch")
    far = generate_account_sas(cred, ResourceTypes.from_string("o"), "r",
                               expiry=now() + datetime.timedelta(hours=1),
                               ip_address_or_range="10.1.2.3")
    expect_denied(lambda: sas_table(cluster, far).get_entity("a", "1"),
                  "AuthorizationSourceIPMismatch")
    near = generate_account_sas(cred, ResourceTypes.from_string("o"), "r",
                                expiry=now() + datetime.timedelta(hours=1),
                                ip_address_or_range="127.0.0.0-127.0.0.255")
    assert sas_table(cluster, near).get_entity("a", "1")


# ------------------------------------------------------------ properties
def test_service_properties_roundtrip(svc):
    """Set then Get service properties: logging, both metrics and CORS come
    back as set (spec §3.6)."""
    rule = TableCorsRule(["http://app.example"], ["GET", "PUT"],
                         allowed_headers=["x-ms-meta-*", "x-custom"],
                         exposed_headers=["x-ms-request-id"],
                         max_age_in_seconds=600)
    svc.set_service_properties(
        analytics_logging=TableAnalyticsLogging(
            read=True, write=True, delete=False,
            retention_policy=TableRetentionPolicy(enabled=True, days=7)),
        hour_metrics=TableMetrics(
            enabled=True, include_apis=True,
            retention_policy=TableRetentionPolicy(enabled=True, days=3)),
        minute_metrics=TableMetrics(enabled=False),
        cors=[rule])
    p = svc.get_service_properties()
    lg = p["analytics_logging"]
    assert (lg.read, lg.write, lg.delete) == (True, True, False)
    assert lg.retention_policy.enabled and lg.retention_policy.days == 7
    hm = p["hour_metrics"]
    assert hm.enabled and hm.include_apis and hm.retention_policy.days == 3
    assert p["minute_metrics"].enabled is False
    assert len(p["cors"]) == 1
    c = p["cors"][0]
    assert c.allowed_origins == ["http://app.example"]
    assert c.allowed_methods == ["GET", "PUT"]
    assert c.allowed_headers == ["x-ms-meta-*", "x-custom"]
    assert c.exposed_headers == ["x-ms-request-id"]
    assert c.max_age_in_seconds == 600


def test_service_properties_partial_update(svc):
    """A PUT that omits sections keeps them: only CORS changes here."""
    svc.set_service_properties(
        analytics_logging=TableAnalyticsLogging(
            read=True, retention_policy=TableRetentionPolicy(enabled=False)))
    svc.set_service_properties(cors=[TableCorsRule(["*"], ["GET"])])
    p = svc.get_service_properties()
    assert p["analytics_logging"].read is True
    assert [r.allowed_origins for r in p["cors"]] == [["*"]]


def test_service_properties_raw(cluster):
    """PUT answers 202 with no body; malformed or over-limit documents are
    400 InvalidXmlDocument (storage XML); GET is application/xml."""
    target = acct_path(cluster, "/?restype=service&comp=properties")
    rule = ("<CorsRule><AllowedOrigins>*</AllowedOrigins><AllowedMethods>GET"
            "</AllowedMethods><AllowedHeaders></AllowedHeaders>"
            "<ExposedHeaders></ExposedHeaders><MaxAgeInSeconds>5"
            "</MaxAgeInSeconds></CorsRule>")
    six = ("<StorageServiceProperties><Cors>%s</Cors>"
           "</StorageServiceProperties>" % (rule * 6)).encode()
    for body in (six, b"<StorageServiceProperties><Logging>",
                 b"<Wrong/>",
                 b"<StorageServiceProperties><HourMetrics><Enabled>maybe"
                 b"</Enabled></HourMetrics></StorageServiceProperties>"):
        st, h, data = raw(cluster, "PUT", target, body=body,
                          content_type="application/xml")
        assert st == 400, data
        assert h["x-ms-error-code"] == "InvalidXmlDocument"
        assert storage_error(data)[0] == "InvalidXmlDocument"
        assert "dataserviceversion" not in h
    five = six.replace(rule.encode(), b"", 1)
    st, h, data = raw(cluster, "PUT", target, body=five,
                      content_type="application/xml")
    assert st == 202 and data == b""
    st, h, data = raw(cluster, "GET", target)
    assert st == 200 and h["content-type"].startswith("application/xml")
    assert len(ET.fromstring(data).find("Cors").findall("CorsRule")) == 5
    # Back to a single rule for the CORS tests below.
    st, _, _ = raw(cluster, "PUT", target, content_type="application/xml",
                   body=("<StorageServiceProperties><Cors>%s</Cors>"
                         "</StorageServiceProperties>" % rule).encode())
    assert st == 202


def test_service_stats(cluster, svc):
    """Get Service Stats answers on the secondary (the SDK's call):
    GeoReplication live with a LastSyncTime; the primary address refuses it
    (400 InvalidQueryParameterValue), as Azure does."""
    stats = svc.get_service_stats()
    assert stats["geo_replication"]["status"] == "live"
    assert stats["geo_replication"]["last_sync_time"] is not None
    st, h, data = raw(cluster, "GET",
                      "/%s/?restype=service&comp=stats" % cluster.account)
    assert st == 400 and h["x-ms-error-code"] == "InvalidQueryParameterValue"
    for acct in (cluster.account + "-secondary",):
        st, h, data = raw(cluster, "GET",
                          "/%s/?restype=service&comp=stats" % acct)
        assert st == 200, data
        root = ET.fromstring(data)
        assert root.findtext("GeoReplication/Status") == "live"
        email.utils.parsedate_to_datetime(
            root.findtext("GeoReplication/LastSyncTime"))


def test_service_properties_secondary_read_only(cluster):
    """The secondary address is read-only: Set Service Properties there is
    403 AuthorizationFailure."""
    st, h, _ = raw(cluster, "PUT", "/%s-secondary/?restype=service&comp="
                   "properties" % cluster.account,
                   body=b"<StorageServiceProperties/>",
                   content_type="application/xml")
    assert st == 403 and h["x-ms-error-code"] == "AuthorizationFailure"


# ------------------------------------------------------------ CORS
@pytest.fixture(scope="module")
def cors_rules(svc):
    svc.set_service_properties(cors=[
        TableCorsRule(["http://app.example", "http://other.example"],
                      ["GET", "PUT", "DELETE"],
                      allowed_headers=["x-ms-meta-*", "x-custom"],
                      exposed_headers=["x-ms-request-id", "etag"],
                      max_age_in_seconds=600),
        TableCorsRule(["*"], ["GET"], max_age_in_seconds=60),
    ])


def preflight(cluster, headers, path=None):
    return raw(cluster, "OPTIONS", path or acct_path(cluster, "/" + TABLE),
               headers=headers, sign=False)


def test_cors_preflight_allowed(cluster, cors_rules):
    """A matching preflight: 200 with the Access-Control-* headers, no
    auth needed."""
    st, h, data = preflight(cluster, {
        "Origin": "http://app.example",
        "Access-Control-Request-Method": "PUT",
        "Access-Control-Request-Headers": "x-ms-meta-color, x-custom"})
    assert st == 200, data
    assert h["access-control-allow-origin"] == "http://app.example"
    assert h["access-control-allow-methods"] == "PUT"
    assert h["access-control-allow-headers"] == "x-ms-meta-color, x-custom"
    assert h["access-control-max-age"] == "600"
    assert h["access-control-allow-credentials"] == "true"
    # The wildcard rule lets any origin GET.
    st, h, _ = preflight(cluster, {"Origin": "http://random.example",
                                   "Access-Control-Request-Method": "GET"})
    assert st == 200 and h["access-control-max-age"] == "60"


def test_cors_preflight_refused(cluster, cors_rules):
    """No matching rule (origin, method or header): 403
    CorsPreflightFailure with a storage XML body."""
    for hdrs in ({"Origin": "http://evil.example",
                  "Access-Control-Request-Method": "PUT"},
                 {"Origin": "http://app.example",
                  "Access-Control-Request-Method": "POST"},
                 {"Origin": "http://app.example",
                  "Access-Control-Request-Method": "PUT",
                  "Access-Control-Request-Headers": "x-forbidden"}):
        st, h, data = preflight(cluster, hdrs)
        assert st == 403, (hdrs, data)
        assert h["x-ms-error-code"] == "CorsPreflightFailure"
        assert storage_error(data)[0] == "CorsPreflightFailure"
        assert "access-control-allow-origin" not in h


def test_cors_preflight_missing_headers(cluster, cors_rules):
    """Origin or Access-Control-Request-Method missing: 400
    InvalidHeaderValue."""
    for hdrs in ({"Origin": "http://app.example"},
                 {"Access-Control-Request-Method": "GET"}, {}):
        st, h, data = preflight(cluster, hdrs)
        assert st == 400, (hdrs, data)
        assert h["x-ms-error-code"] == "InvalidHeaderValue"
        assert storage_error(data)[0] == "InvalidHeaderValue"


def test_cors_preflight_other_account(cluster, cors_rules):
    """CORS rules are per account: another account has none -> 403."""
    st, h, _ = preflight(cluster, {"Origin": "http://app.example",
                                   "Access-Control-Request-Method": "GET"},
                         path="/someotheraccount/" + TABLE)
    assert st == 403 and h["x-ms-error-code"] == "CorsPreflightFailure"


def test_cors_headers_on_responses(cluster, table, cors_rules):
    """Ordinary responses to a matching Origin carry
    Access-Control-Allow-Origin, -Expose-Headers and Vary: Origin; a
    non-matching Origin gets none; errors carry them too."""
    target = acct_path(cluster, "/%s(PartitionKey='a',RowKey='1')" % TABLE)
    accept = {"Accept": "application/json;odata=nometadata",
              "Origin": "http://other.example"}
    st, h, _ = raw(cluster, "GET", target, headers=accept)
    assert st == 200
    assert h["access-control-allow-origin"] == "http://other.example"
    assert h["access-control-expose-headers"] == "x-ms-request-id,etag"
    assert h["vary"] == "Origin"
    accept["Origin"] = "http://random.example"
    st, h, _ = raw(cluster, "GET", target, headers=accept)
    assert st == 200 and h["access-control-allow-origin"] == "*"
    st, h, _ = raw(cluster, "DELETE", target, headers={
        "Origin": "http://random.example", "If-Match": "*"}, sign=False)
    assert st in (401, 403)
    assert "access-control-allow-origin" not in h  # DELETE not allowed for *
    missing = acct_path(cluster, "/%s(PartitionKey='zz',RowKey='1')" % TABLE)
    st, h, _ = raw(cluster, "GET", missing, headers={
        "Origin": "http://app.example"})
    assert st == 404
    assert h["access-control-allow-origin"] == "http://app.example"
    st, h, _ = raw(cluster, "GET", target)
    assert "access-control-allow-origin" not in h


# ------------------------------------------------------------ grace period
def test_table_being_deleted(svc):
    """Delete then create the same name at once: 409 TableBeingDeleted
    (also in another case); other names are unaffected; after the grace
    period the name can be created again."""
    svc.create_table("gracetable")
    svc.delete_table("gracetable")
    t0 = time.monotonic()
    # The SDK (12.4.2) re-raises a 409 whose code it does not map as a
    # plain HttpResponseError, not ResourceExistsError: check the wire.
    with pytest.raises(HttpResponseError) as ei:
        svc.create_table("gracetable")
    assert code_of(ei.value) == "TableBeingDeleted"
    assert status_of(ei.value) == 409
    with pytest.raises(HttpResponseError) as ei:
        svc.create_table("GraceTable")
    assert code_of(ei.value) == "TableBeingDeleted"
    svc.create_table("gracetable2")
    # Listing does not show it; deleting it again is 404 (SDK swallows).
    assert "gracetable" not in [t.name for t in svc.list_tables()]
    time.sleep(max(0.0, GRACE_MS / 1000.0 + 0.5 - (time.monotonic() - t0)))
    tc = svc.create_table("gracetable")
    tc.create_entity({"PartitionKey": "p", "RowKey": "r"})
    assert [e["RowKey"] for e in tc.list_entities()] == ["r"]


def test_table_being_deleted_raw(cluster):
    """The raw 409: x-ms-error-code TableBeingDeleted and the documented
    message in the OData JSON error."""
    target = acct_path(cluster, "/Tables")
    body = b'{"TableName":"rawgrace"}'
    ct = "application/json"
    hdr = {"Accept": "application/json;odata=nometadata"}
    st, _, _ = raw(cluster, "POST", target, body=body, content_type=ct,
                   headers=hdr)
    assert st == 201
    st, _, _ = raw(cluster, "DELETE", acct_path(cluster, "/Tables('rawgrace')"))
    assert st == 204
    st, h, data = raw(cluster, "POST", target, body=body, content_type=ct,
                      headers=hdr)
    assert st == 409
    assert h["x-ms-error-code"] == "TableBeingDeleted"
    assert b"The specified table is being deleted." in data


def test_grace_survives_master_restart(cluster, svc):
    """The tombstone is durable: after a master restart inside the grace
    period the name is still refused."""
    svc.create_table("gracedurable")
    svc.delete_table("gracedurable")
    t0 = time.monotonic()
    cluster.start_process("master")  # SIGTERM, wait, start on its port
    deadline = time.monotonic() + 20
    while True:
        try:
            svc.create_table("gracedurable")
            outcome = "created"
        except HttpResponseError as e:
            if status_of(e) != 409:
                # 503 while the front end reconnects to the new master.
                assert time.monotonic() < deadline, e
                time.sleep(0.2)
                continue
            outcome = code_of(e)
        break
    if outcome == "created" and time.monotonic() - t0 > GRACE_MS / 1000.0:
        pytest.skip("master restart outlasted the %d ms grace period"
                    % GRACE_MS)
    assert outcome == "TableBeingDeleted"
