"""Raw HTTP against the front end: what the SDKs hide. Requests are built
and signed by hand (rawhttp.py: SharedKey, SharedKeyLite, SAS) and the
expectations come from docs/table-api-spec.md:

- headers on every response (§2): x-ms-request-id, x-ms-version, Date,
  x-ms-client-request-id echo rules, Cache-Control, X-Content-Type-Options,
  DataServiceVersion, Content-Type per metadata level;
- status, x-ms-error-code and the error body of every §8.2 code the server
  can produce (JSON odata.error for OData operations, storage XML for ACL,
  service properties and preflight);
- metadata levels (exact keys), EDM encoding on the wire (§4), $format,
  Prefer / Preference-Applied, Location / DataServiceId, key predicates,
  verb tunnelling, MERGE, continuation headers, Atom -> 415, versions,
  clock skew, SharedKeyLite, host-style and secondary addressing,
  Expect: 100-continue and chunked bodies, $batch wire format (§5), ACL and
  service-properties XML, CORS.
"""

import base64
import datetime
import email.utils
import http.client
import json
import re
import socket
import urllib.parse
import uuid
import xml.etree.ElementTree as ET

import pytest

import rawhttp
from rawhttp import (ETAG_RE, GUID_RE, JSON_FULL, JSON_MINIMAL, JSON_NONE,
                     TS_RE, entity_path)

JSON_CT = "application/json;odata=%s;streaming=true;charset=utf-8"
ERR_CT = JSON_CT % "minimalmetadata"
TIME_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{7}Z$")
MESSAGES = {  # §8.2, first line of message.value
    "TableNotFound": "The table specified does not exist.",
    "TableAlreadyExists": "The table specified already exists.",
    "TableBeingDeleted":
        "The specified table is being deleted. Try operation later.",
    "ResourceNotFound": "The specified resource does not exist.",
    "EntityAlreadyExists": "The specified entity already exists.",
    "UpdateConditionNotSatisfied":
        "The update condition specified in the request was not satisfied.",
    "InvalidResourceName":
        "The specified resource name contains invalid characters.",
    "PropertiesNeedValue":
        "The values are not specified for all properties in the entity.",
    "PropertyNameInvalid": "The property name is invalid.",
    "PropertyNameTooLong":
        "The property name exceeds the maximum allowed length.",
    "PropertyValueTooLarge":
        "The property value exceeds the maximum allowed size (64KB). If the "
        "property value is a string, it is UTF-16 encoded and the maximum "
        "number of characters should be 32K or less.",
    "EntityTooLarge": "The entity is larger than the maximum size permitted.",
    "TooManyProperties":
        "The entity contains more properties than allowed.",
    "DuplicatePropertiesSpecified":
        "A property is specified more than one time.",
    "MethodNotAllowed":
        "The requested method is not allowed on the specified resource.",
    "UnsupportedHttpVerb":
        "The resource doesn't support the specified HTTP verb.",
    "AuthenticationFailed":
        "Server failed to authenticate the request. Make sure the value of "
        "Authorization header is formed correctly including the signature.",
    "InvalidAuthenticationInfo":
        "Authentication information is not given in the correct format. "
        "Check the value of Authorization header.",
    "AuthorizationFailure":
        "This request is not authorized to perform this operation.",
    "AuthorizationPermissionMismatch":
        "This request is not authorized to perform this operation using "
        "this permission.",
    "InvalidHeaderValue":
        "The value for one of the HTTP headers is not in the correct format.",
    "MissingRequiredHeader": "A required HTTP header was not specified.",
    "InvalidQueryParameterValue":
        "Value for one of the query parameters specified in the request URI "
        "is invalid.",
    "InvalidUri":
        "The requested URI does not represent any resource on the server.",
    "InvalidXmlDocument": "The specified XML is not syntactically valid.",
    "RequestBodyTooLarge":
        "The request body is too large and exceeds the maximum permissible "
        "limit.",
    "CorsPreflightFailure":
        "CORS not enabled or no matching rule found for this request.",
}
_seq = iter(range(10 ** 6))


def tname(prefix="raw"):
    return "%s%05d" % (prefix, next(_seq))


# ------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def cli(cluster):
    c = rawhttp.Client(cluster.fe_port)
    yield c
    c.close()


@pytest.fixture(scope="module")
def root(cluster):
    return "http://127.0.0.1:%d/%s" % (cluster.fe_port, cluster.account)


SAMPLE = {
    "PartitionKey": "p1", "RowKey": "r1",
    "s": "str", "i": 5, "b": True, "f": 1.5,
    "l@odata.type": "Edm.Int64", "l": "9007199254740993",
    "d@odata.type": "Edm.Double", "d": 2,
    "n@odata.type": "Edm.Double", "n": "NaN",
    "t@odata.type": "Edm.DateTime", "t": "2008-07-10T00:00:00",
    "g@odata.type": "Edm.Guid", "g": "c9da6455-213d-42c9-9a79-3e9149a57833",
    "x@odata.type": "Edm.Binary", "x": "AQIDBA==",
}
SAMPLE_PROPS = {"s", "i", "b", "f", "l", "d", "n", "t", "g", "x"}


@pytest.fixture(scope="module")
def tbl(cli):
    """A table with the SAMPLE entity and a few plain ones."""
    name = tname("rawt")
    cli.create_table(name)
    r = cli.insert(name, SAMPLE)
    assert r.status == 201, r
    for pk in ("a", "b", "c"):
        for rk in ("1", "2"):
            assert cli.insert(name, {"PartitionKey": pk, "RowKey": rk,
                                     "v": 1}).status == 201
    return name


def new_table(cli):
    name = tname()
    cli.create_table(name)
    return name


# ------------------------------------------------------------ checks
def check_common(r):
    """§2: headers every response carries."""
    rid = r.header("x-ms-request-id")
    assert rid and GUID_RE.match(rid), r
    assert r.header("x-ms-version"), r
    date = r.header("Date")
    assert date, r
    d = email.utils.parsedate_to_datetime(date)
    now = datetime.datetime.now(datetime.timezone.utc)
    assert abs((d - now).total_seconds()) < 300, date
    assert date.endswith(" GMT"), date
    assert r.header("Cache-Control") == "no-cache", r
    assert r.header("X-Content-Type-Options") == "nosniff", r


def check_error(r, status, code, message=None, xml=None):
    """§8.1: status, x-ms-error-code, and the JSON odata.error (or storage
    XML) body whose message is '<text>\\nRequestId:<id>\\nTime:<iso7>'."""
    assert r.status == status and r.error_code == code, \
        "want %d %s, got %d %s: %r" % (status, code, r.status, r.error_code,
                                       r)
    check_common(r)
    ct = r.header("Content-Type") or ""
    if message is None:
        message = MESSAGES.get(code)
    rid = r.header("x-ms-request-id")
    if ct.startswith("application/json"):
        assert xml is not True, "expected an XML error body: %r" % r
        assert ct == ERR_CT, ct
        doc = r.json()
        assert list(doc) == ["odata.error"], doc
        err = doc["odata.error"]
        assert err["code"] == code, doc
        assert err["message"]["lang"] == "en-US", doc
        text = err["message"]["value"]
    else:
        assert xml is not False, "expected a JSON error body: %r" % r
        assert ct.startswith("application/xml"), r
        root = ET.fromstring(r.body)
        assert root.tag == "Error", r.body
        assert root.findtext("Code") == code, r.body
        text = root.findtext("Message")
    lines = text.split("\n")
    assert len(lines) >= 3, text
    assert lines[-2] == "RequestId:" + rid, text
    assert lines[-1].startswith("Time:") and \
        TIME_RE.match(lines[-1][5:]), text
    if message:
        assert "\n".join(lines[:-2]) == message, text
    return text


def json_ct(level):
    return JSON_CT % level


# ================================================================ headers
def _requests(cli, tbl):
    p = cli.path
    return [
        ("GET /Tables", lambda: cli.get(p("/Tables"))),
        ("GET entity", lambda: cli.get(p(entity_path(tbl, "p1", "r1")))),
        ("GET missing entity", lambda: cli.get(p(entity_path(tbl, "p1",
                                                              "zz")))),
        ("query", lambda: cli.get(p("/%s()" % tbl))),
        ("insert", lambda: cli.insert(tbl, {"PartitionKey": "h",
                                            "RowKey": str(uuid.uuid4())})),
        ("upsert", lambda: cli.put(p(entity_path(tbl, "h", "u")),
                                   {"v": 1})),
        ("bad signature", lambda: cli.get(
            p("/Tables"), auth="SharedKey devstoreaccount1:AAAA")),
        ("no auth", lambda: cli.get(p("/Tables"), auth="none")),
        ("bad verb", lambda: cli.request("FOO", p("/Tables"))),
        ("preflight", lambda: cli.request(
            "OPTIONS", p("/Tables"), auth="none",
            headers={"Origin": "https://x.example",
                     "Access-Control-Request-Method": "GET"})),
        ("bad version", lambda: cli.get(p("/Tables"), version="nope")),
        ("missing table", lambda: cli.get(p("/nosuchtbl()"))),
    ]


REQ_NAMES = ["GET /Tables", "GET entity", "GET missing entity", "query",
             "insert", "upsert", "bad signature", "no auth", "bad verb",
             "preflight", "bad version", "missing table"]


@pytest.mark.parametrize("which", REQ_NAMES)
def test_common_headers_on_every_response(cli, tbl, which):
    """x-ms-request-id (GUID), x-ms-version, Date (RFC 1123, GMT, now),
    Cache-Control: no-cache, X-Content-Type-Options: nosniff on successes
    and errors alike (§2, §8)."""
    fn = dict(_requests(cli, tbl))[which]
    check_common(fn())


def test_request_ids_unique(cli):
    """Every response has its own x-ms-request-id."""
    ids = {cli.get(cli.path("/Tables")).header("x-ms-request-id")
           for _ in range(20)}
    assert len(ids) == 20


@pytest.mark.parametrize("version", ["2019-02-02", "2019-07-07",
                                     "2020-12-06", "2017-04-17"])
def test_version_echoed(cli, version):
    """x-ms-version echoes the version the request asked for (§11)."""
    r = cli.get(cli.path("/Tables"), version=version)
    assert r.status == 200, r
    assert r.header("x-ms-version") == version


def test_version_echoed_on_error(cli):
    r = cli.get(cli.path("/nosuchtbl()"), version="2020-12-06")
    assert r.status == 404 and r.header("x-ms-version") == "2020-12-06"


def test_future_version_accepted(cli):
    """Well-formed future versions are accepted (§11: be lenient)."""
    r = cli.get(cli.path("/Tables"), version="2031-01-01")
    assert r.status == 200, r


def test_missing_version_still_json(cli):
    """No x-ms-version: still answered, JSON (Accept asks for it), and a
    version is echoed (§11)."""
    r = cli.get(cli.path("/Tables"), version=None)
    assert r.status == 200, r
    assert r.header("x-ms-version")
    assert r.header("Content-Type").startswith("application/json")


@pytest.mark.parametrize("value,echo", [
    ("abc-123", True),
    ("x" * 1024, True),
    ("x" * 1025, False),
    ("caf\u00e9", False),
    ("{" + str(uuid.uuid4()) + "}", True),
])
def test_client_request_id_echo(cli, value, echo):
    """x-ms-client-request-id is echoed only when it is at most 1024
    visible ASCII characters (§2, §9)."""
    hv = value.encode("utf-8").decode("latin-1")
    for target in ("/Tables", "/nosuchtbl()"):
        r = cli.get(cli.path(target),
                    headers={"x-ms-client-request-id": hv})
        got = r.header("x-ms-client-request-id")
        if echo:
            assert got == value, (target, got)
        else:
            assert got is None, (target, got)


def test_dataserviceversion_on_odata_responses(cli, tbl):
    """OData operations answer DataServiceVersion: 3.0; (§2)."""
    for r in (cli.get(cli.path("/Tables")),
              cli.get(cli.path("/%s()" % tbl)),
              cli.get(cli.path(entity_path(tbl, "p1", "r1"))),
              cli.get(cli.path(entity_path(tbl, "p1", "nope")))):
        assert r.header("DataServiceVersion") == "3.0;", r


@pytest.mark.parametrize("accept,level", [
    (JSON_NONE, "nometadata"),
    (JSON_MINIMAL, "minimalmetadata"),
    (JSON_FULL, "fullmetadata"),
    ("application/json", "minimalmetadata"),
    ("*/*", "minimalmetadata"),
    (None, "minimalmetadata"),
])
def test_content_type_per_metadata_level(cli, tbl, accept, level):
    """Content-Type is application/json;odata=<level>;streaming=true;
    charset=utf-8; bare application/json and no Accept mean minimal (§2)."""
    for target in ("/Tables", "/%s()" % tbl, entity_path(tbl, "p1", "r1")):
        r = cli.get(cli.path(target), accept=accept)
        assert r.status == 200, r
        assert r.header("Content-Type") == json_ct(level), (target, r)


# ================================================================ errors
def test_err_table_not_found(cli):
    check_error(cli.get(cli.path("/nosuchtbl()")), 404, "TableNotFound")
    check_error(cli.insert("nosuchtbl", {"PartitionKey": "a",
                                         "RowKey": "b"}),
                404, "TableNotFound")


def test_err_table_already_exists(cli, tbl):
    r = cli.post(cli.path("/Tables"), {"TableName": tbl.upper()})
    check_error(r, 409, "TableAlreadyExists")


def test_err_table_being_deleted(cli):
    name = new_table(cli)
    assert cli.delete(cli.path("/Tables('%s')" % name)).status == 204
    check_error(cli.post(cli.path("/Tables"), {"TableName": name}), 409,
                "TableBeingDeleted")


def test_err_resource_not_found_entity(cli, tbl):
    check_error(cli.get(cli.path(entity_path(tbl, "p1", "nope"))), 404,
                "ResourceNotFound")


def test_err_resource_not_found_delete_table(cli):
    """Delete of a missing table: 404 ResourceNotFound (§3.3)."""
    check_error(cli.delete(cli.path("/Tables('nosuchtbl')")), 404,
                "ResourceNotFound")


def test_err_entity_already_exists(cli, tbl):
    check_error(cli.insert(tbl, {"PartitionKey": "p1", "RowKey": "r1"}),
                409, "EntityAlreadyExists")


def test_err_update_condition(cli, tbl):
    """A stale ETag in the form the server issues: 412 for every
    conditional verb (§3.12-§3.14)."""
    stale = 'W/"datetime\'2001-01-01T00%3A00%3A00.1234567Z\'"'
    for verb in ("PUT", "MERGE", "PATCH", "DELETE"):
        r = cli.request(verb, cli.path(entity_path(tbl, "a", "1")),
                        body=None if verb == "DELETE" else {"v": 2},
                        headers={"If-Match": stale})
        check_error(r, 412, "UpdateConditionNotSatisfied")


@pytest.mark.parametrize("etag", [
    'W/"datetime\'2001-01-01T00%3A00%3A00Z\'"',
    'W/"datetime\'2001-01-01T00:00:00.5Z\'"',
    'W/"0x8D5B168C7B6E589"',
    'W/"anything"',
])
def test_err_update_condition_other_weak_etags(cli, tbl, etag):
    """Any well-formed weak ETag that does not match is 412, not 400:
    clients treat ETags as opaque, the docs show W/"0x..." (§4.4)."""
    r = cli.put(cli.path(entity_path(tbl, "a", "1")), {"v": 1},
                headers={"If-Match": etag})
    check_error(r, 412, "UpdateConditionNotSatisfied")


def test_err_key_count(cli, tbl):
    """Wrong number of keys in the predicate: 400 InvalidInput with the
    documented message (§1.2)."""
    for pred in ("(PartitionKey='a')", "(RowKey='a')",
                 "(PartitionKey='a',RowKey='b',Extra='c')"):
        check_error(cli.get(cli.path("/%s%s" % (tbl, pred))), 400,
                    "InvalidInput",
                    "The number of keys specified in the URI does not "
                    "match number of key properties for the resource.")


@pytest.mark.parametrize("name,code,msg", [
    ("ab", "OutOfRangeInput", "The specified resource name length is not "
     "within the permissible limits."),
    ("a" * 64, "OutOfRangeInput", "The specified resource name length is "
     "not within the permissible limits."),
    ("1abc", "InvalidResourceName", None),
    ("ab-c", "InvalidResourceName", None),
    ("tables", "InvalidResourceName", None),
])
def test_err_table_name(cli, name, code, msg):
    """Table name rules with the exact codes and messages the Python SDK
    keys off (§8.1, §9)."""
    check_error(cli.post(cli.path("/Tables"), {"TableName": name}), 400,
                code, msg)


def test_err_create_table_without_name(cli):
    r = cli.post(cli.path("/Tables"), {"Other": "x"})
    assert r.status == 400 and r.error_code in ("PropertiesNeedValue",
                                                "InvalidInput"), r
    check_error(r, 400, r.error_code)


@pytest.mark.parametrize("body,code", [
    ({"RowKey": "r"}, "PropertiesNeedValue"),
    ({"PartitionKey": "p"}, "PropertiesNeedValue"),
    ({"PartitionKey": "p", "RowKey": "r", "a-b": 1}, "PropertyNameInvalid"),
    ({"PartitionKey": "p", "RowKey": "r", "x" * 256: 1},
     "PropertyNameTooLong"),
    ({"PartitionKey": "p", "RowKey": "r", "s": "x" * 32768},
     "PropertyValueTooLarge"),
    (dict({"PartitionKey": "p", "RowKey": "r"},
          **{"p%d" % i: i for i in range(253)}), "TooManyProperties"),
    (dict({"PartitionKey": "p", "RowKey": "r"},
          **{"s%02d" % i: "y" * 30000 for i in range(40)}),
     "EntityTooLarge"),
], ids=["noPK", "noRK", "badname", "longname", "bigvalue", "toomany",
        "toolarge"])
def test_err_entity_validation(cli, tbl, body, code):
    check_error(cli.insert(tbl, body), 400, code)


def test_err_duplicate_properties(cli, tbl):
    body = '{"PartitionKey":"p","RowKey":"dup","a":1,"a":2}'
    check_error(cli.insert(tbl, body), 400, "DuplicatePropertiesSpecified")


def test_err_bad_typed_value(cli, tbl):
    """A value not convertible to its annotated type: 400 InvalidInput
    (§4.2)."""
    for prop in ({"a@odata.type": "Edm.Int64", "a": "abc"},
                 {"a@odata.type": "Edm.Int32", "a": 3000000000},
                 {"a@odata.type": "Edm.Guid", "a": "xyz"},
                 {"a@odata.type": "Edm.Binary", "a": "!!!"},
                 {"a@odata.type": "Edm.DateTime", "a": "yesterday"},
                 {"a@odata.type": "Edm.Unknown", "a": "1"}):
        body = dict(prop, PartitionKey="p", RowKey="bad")
        r = cli.insert(tbl, body)
        assert r.status == 400, (prop, r)
        check_error(r, 400, r.error_code)
        assert r.error_code in ("InvalidInput", "InvalidValueType",
                                "OutOfRangeInput"), (prop, r)


def test_err_non_string_keys(cli, tbl):
    """PartitionKey/RowKey must be JSON strings (§4.2)."""
    for body in ({"PartitionKey": 1, "RowKey": "r"},
                 {"PartitionKey": "p", "RowKey": None},
                 {"PartitionKey": ["p"], "RowKey": "r"}):
        r = cli.insert(tbl, body)
        assert 400 <= r.status < 500 and r.error_code, (body, r)
        check_error(r, r.status, r.error_code)


def test_err_atom_accept(cli, tbl):
    """Atom at a JSON-era version: 415 AtomFormatNotSupported (§10, §11)."""
    r = cli.get(cli.path("/%s()" % tbl), accept="application/atom+xml")
    assert r.status == 415 and r.error_code == "AtomFormatNotSupported", r
    check_common(r)


def test_err_atom_body(cli, tbl):
    body = ('<?xml version="1.0" encoding="utf-8"?><entry xmlns='
            '"http://www.w3.org/2005/Atom"/>')
    r = cli.post(cli.path("/" + tbl), body,
                 content_type="application/atom+xml")
    assert r.status == 415 and r.error_code == "AtomFormatNotSupported", r


def test_err_method_not_allowed(cli, tbl):
    for verb, target in (("PUT", "/Tables"), ("DELETE", "/Tables"),
                         ("PUT", "/%s()" % tbl)):
        r = cli.request(verb, cli.path(target),
                        body=None if verb == "DELETE" else {})
        check_error(r, 405, "MethodNotAllowed")


def test_err_unsupported_verb(cli):
    check_error(cli.request("FOO", cli.path("/Tables")), 405,
                "UnsupportedHttpVerb")


def test_err_xmethod_not_using_post(cli, tbl):
    r = cli.get(cli.path(entity_path(tbl, "a", "1")),
                headers={"X-HTTP-Method": "MERGE"})
    check_error(r, 400, "XMethodNotUsingPost", "")


def test_err_xmethod_incorrect_value(cli, tbl):
    r = cli.post(cli.path(entity_path(tbl, "a", "1")), {"v": 1},
                 headers={"X-HTTP-Method": "FOO"})
    check_error(r, 400, "XMethodIncorrectValue", "")


def test_err_xmethod_incorrect_count(cluster, tbl):
    target = "/%s%s" % (cluster.account, entity_path(tbl, "a", "1"))
    body = b'{"v":1}'
    date = rawhttp.http_date()
    hdrs = [("Host", "127.0.0.1:%d" % cluster.fe_port),
            ("x-ms-date", date), ("x-ms-version", "2019-02-02"),
            ("Accept", JSON_MINIMAL), ("Content-Type", "application/json"),
            ("Content-Length", str(len(body))),
            ("X-HTTP-Method", "MERGE"), ("X-HTTP-Method", "DELETE"),
            ("Authorization", rawhttp.shared_key("POST", target,
                                                 "application/json", date))]
    r, _, s = rawhttp.raw_exchange(
        cluster.fe_port, rawhttp.build_request("POST", target, hdrs, body),
        "POST")
    s.close()
    check_error(r, 400, "XMethodIncorrectCount", "")


def test_err_host_not_present(cluster):
    """HTTP/1.0 without Host: 400 HostInformationNotPresent (§8.2)."""
    target = "/%s/Tables" % cluster.account
    date = rawhttp.http_date()
    hdrs = [("x-ms-date", date), ("x-ms-version", "2019-02-02"),
            ("Accept", JSON_MINIMAL),
            ("Authorization", rawhttp.shared_key("GET", target, "", date))]
    r, _, s = rawhttp.raw_exchange(
        cluster.fe_port, rawhttp.build_request("GET", target, hdrs,
                                               version=b"HTTP/1.0"))
    s.close()
    check_error(r, 400, "HostInformationNotPresent", "")


def test_err_authentication_failed(cli):
    r = cli.get(cli.path("/Tables"),
                auth=rawhttp.shared_key("GET", cli.path("/Tables"), "",
                                        rawhttp.http_date(),
                                        key=base64.b64encode(b"z" * 64)
                                        .decode()))
    check_error(r, 403, "AuthenticationFailed")


@pytest.mark.parametrize("auth", [
    "SharedKey devstoreaccount1", "SharedKey :abc", "SharedKey", "garbage",
    "SharedKey devstoreaccount1:not*base64!",
])
def test_err_invalid_authentication_info(cli, auth):
    """A malformed Authorization header: 400 InvalidAuthenticationInfo
    (or 403 AuthenticationFailed for a well-formed but wrong one)."""
    r = cli.get(cli.path("/Tables"), auth=auth)
    assert (r.status, r.error_code) in (
        (400, "InvalidAuthenticationInfo"), (403, "AuthenticationFailed")), r
    check_error(r, r.status, r.error_code)


def test_err_no_authentication(cli):
    """No credentials: 401 NoAuthenticationInformation (§8.2)."""
    r = cli.get(cli.path("/Tables"), auth="none")
    assert r.status == 401 and r.error_code == "NoAuthenticationInformation"
    check_error(r, 401, "NoAuthenticationInformation", "")


def test_err_unknown_account(cluster):
    c = rawhttp.Client(cluster.fe_port, account="nosuchacct")
    r = c.get("/nosuchacct/Tables")
    c.close()
    assert r.status in (403, 404) and r.error_code, r
    check_error(r, r.status, r.error_code)


def test_err_write_to_secondary(cli, tbl):
    """Writes to the -secondary address: 403 AuthorizationFailure."""
    target = "/%s-secondary/%s" % (cli.account, tbl)
    r = cli.post(target, {"PartitionKey": "s", "RowKey": "s"})
    check_error(r, 403, "AuthorizationFailure")


def test_err_sas_permission(cli, tbl):
    sas = rawhttp.table_sas(tbl, sp="r")
    r = cli.post(cli.path("/%s?%s" % (tbl, sas)),
                 {"PartitionKey": "s", "RowKey": "x"}, auth="none")
    check_error(r, 403, "AuthorizationPermissionMismatch")


@pytest.mark.parametrize("kw,code", [
    ({"srt": "s"}, "AuthorizationResourceTypeMismatch"),
    ({"ss": "b"}, "AuthorizationServiceMismatch"),
    ({"spr": "https"}, "AuthorizationProtocolMismatch"),
    ({"sip": "10.1.2.3"}, "AuthorizationSourceIPMismatch"),
    ({"sp": "w"}, "AuthorizationPermissionMismatch"),
])
def test_err_account_sas(cli, tbl, kw, code):
    """Account SAS checks (§7.4): each mismatch has its own 403 code."""
    sas = rawhttp.account_sas(**kw)
    r = cli.get(cli.path(entity_path(tbl, "a", "1")) + "?" + sas,
                auth="none")
    assert r.status == 403 and r.error_code == code, r
    check_error(r, 403, code, "")


@pytest.mark.parametrize("kw,code", [
    ({"spr": "https"}, "AuthorizationProtocolMismatch"),
    ({"sip": "10.1.2.3"}, "AuthorizationSourceIPMismatch"),
    ({"sp": "a"}, "AuthorizationPermissionMismatch"),
    ({"expiry": datetime.datetime(2001, 1, 1,
                                  tzinfo=datetime.timezone.utc),
      "start": datetime.datetime(2000, 1, 1,
                                 tzinfo=datetime.timezone.utc)},
     "AuthenticationFailed"),
    ({"spk": "x", "epk": "y"}, "AuthorizationFailure"),
])
def test_err_table_sas(cli, tbl, kw, code):
    """Service SAS checks (§7.3)."""
    sas = rawhttp.table_sas(tbl, **kw)
    r = cli.get(cli.path(entity_path(tbl, "a", "1")) + "?" + sas,
                auth="none")
    assert r.status == 403 and r.error_code == code, r
    check_error(r, 403, code, "")


def test_sas_ok(cli, tbl):
    """A valid service SAS reads an entity, also with sip/spr that match."""
    for kw in ({}, {"sip": "127.0.0.1"}, {"spr": "https,http"},
               {"sip": "127.0.0.0-127.0.0.255"}):
        sas = rawhttp.table_sas(tbl, **kw)
        r = cli.get(cli.path(entity_path(tbl, "a", "1")) + "?" + sas,
                    auth="none")
        assert r.status == 200, (kw, r)


@pytest.mark.parametrize("sv", ["2019-02-02", "2020-12-06"])
def test_account_sas_versions(cli, tbl, sv):
    """Account SAS string-to-sign: sv >= 2020-12-06 signs the extra ses
    line (§7.4); both forms are accepted."""
    sas = rawhttp.account_sas(sp="r", srt="o", sv=sv)
    r = cli.get(cli.path(entity_path(tbl, "a", "1")) + "?" + sas,
                auth="none")
    assert r.status == 200, r


def test_table_sas_2020_version(cli, tbl):
    """The service SAS string-to-sign is unchanged for sv=2020-12-06."""
    sas = rawhttp.table_sas(tbl, sp="r", sv="2020-12-06")
    r = cli.get(cli.path(entity_path(tbl, "a", "1")) + "?" + sas,
                auth="none")
    assert r.status == 200, r


def test_sas_request_runs_under_sv(cli, tbl):
    """A SAS request without x-ms-version runs under (and echoes) the
    token's sv (§7.3)."""
    sas = rawhttp.table_sas(tbl, sp="r", sv="2019-02-02")
    r = cli.get(cli.path(entity_path(tbl, "a", "1")) + "?" + sas,
                auth="none", version=None)
    assert r.status == 200, r
    assert r.header("x-ms-version") == "2019-02-02"
    assert r.header("Content-Type").startswith("application/json")


def test_err_invalid_header_value_version(cli):
    for v in ("garbage", "2019-02", "2019/02/02", "2008-01-01"):
        r = cli.get(cli.path("/Tables"), version=v)
        check_error(r, 400, "InvalidHeaderValue")


def test_err_missing_if_match_on_delete(cli, tbl):
    check_error(cli.delete(cli.path(entity_path(tbl, "a", "1"))), 400,
                "MissingRequiredHeader")


@pytest.mark.parametrize("top", ["-1", "abc", "1.5"])
def test_err_bad_top(cli, tbl, top):
    r = cli.get(cli.path("/%s()?$top=%s" % (tbl, top)))
    check_error(r, 400, "InvalidQueryParameterValue")


def test_err_invalid_uri(cli):
    r = cli.get("/", auth="none")
    check_error(r, 400, "InvalidUri")


def test_err_body_too_large(cli, tbl):
    """A body over the 4 MiB limit: 413 RequestBodyTooLarge, and the
    connection still answers (§8.2)."""
    body = b'{"PartitionKey":"p","RowKey":"big","s":"' + \
        b"x" * (4 * 1024 * 1024) + b'"}'
    check_error(cli.post(cli.path("/" + tbl), body), 413,
                "RequestBodyTooLarge")
    assert cli.get(cli.path("/Tables")).status == 200


def test_err_body_too_large_expect_continue(cluster, tbl):
    """With Expect: 100-continue the 413 comes before the body."""
    target = "/%s/%s" % (cluster.account, tbl)
    date = rawhttp.http_date()
    n = 5 * 1024 * 1024
    hdrs = [("Host", "127.0.0.1"), ("x-ms-date", date),
            ("x-ms-version", "2019-02-02"), ("Accept", JSON_MINIMAL),
            ("Content-Type", "application/json"),
            ("Content-Length", str(n)), ("Expect", "100-continue"),
            ("Authorization", rawhttp.shared_key("POST", target,
                                                 "application/json", date))]
    s = socket.create_connection(("127.0.0.1", cluster.fe_port), timeout=30)
    s.sendall(rawhttp.build_request("POST", target, hdrs))
    r, _ = rawhttp.read_response(s, "POST")
    s.close()
    check_error(r, 413, "RequestBodyTooLarge")


# ================================================================ payloads
def test_metadata_levels_entity_keys(cli, tbl, root):
    """Exact keys of an entity at each metadata level (§4.1)."""
    tgt = cli.path(entity_path(tbl, "p1", "r1"))
    base = {"PartitionKey", "RowKey", "Timestamp"} | SAMPLE_PROPS
    typed = {"l@odata.type", "n@odata.type", "t@odata.type", "g@odata.type",
             "x@odata.type"}
    none = cli.get(tgt, accept=JSON_NONE).json()
    assert set(none) == base, set(none) ^ base
    mini = cli.get(tgt, accept=JSON_MINIMAL).json()
    want = base | typed | {"odata.metadata", "odata.etag"}
    assert set(mini) == want, set(mini) ^ want
    full = cli.get(tgt, accept=JSON_FULL).json()
    want = base | typed | {"odata.metadata", "odata.etag", "odata.type",
                           "odata.id", "odata.editLink",
                           "Timestamp@odata.type"}
    assert set(full) == want, set(full) ^ want
    assert mini["odata.metadata"] == root + "/$metadata#%s/@Element" % tbl
    assert full["odata.type"] == "%s.%s" % (cli.account, tbl)
    assert full["odata.id"] == root + "/%s(PartitionKey='p1',RowKey='r1')" \
        % tbl
    assert full["odata.editLink"] == "%s(PartitionKey='p1',RowKey='r1')" \
        % tbl
    assert full["Timestamp@odata.type"] == "Edm.DateTime"


def test_metadata_levels_query_keys(cli, tbl, root):
    """Query results: odata.metadata only in minimal/full, value array."""
    tgt = cli.path("/%s()" % tbl)
    none = cli.get(tgt, accept=JSON_NONE).json()
    assert list(none) == ["value"], none
    assert not any(k.startswith("odata.") or "@odata" in k
                   for e in none["value"] for k in e), none
    mini = cli.get(tgt, accept=JSON_MINIMAL).json()
    assert set(mini) == {"odata.metadata", "value"}, mini
    assert mini["odata.metadata"] == root + "/$metadata#" + tbl
    assert all("odata.etag" in e for e in mini["value"])
    assert not any("odata.type" in e or "odata.id" in e
                   for e in mini["value"])
    full = cli.get(tgt, accept=JSON_FULL).json()
    assert all(e["odata.type"] == "%s.%s" % (cli.account, tbl) and
               e["Timestamp@odata.type"] == "Edm.DateTime"
               for e in full["value"])


def test_edm_encoding_on_the_wire(cli, tbl):
    """§4.2: Int64 as an annotated string, Double with '.'/exponent (also
    integral ones), NaN as an annotated string, DateTime in UTC with 'Z',
    Guid and Binary annotated; String/Int32/Boolean/finite Double never
    annotated, even in fullmetadata."""
    raw = cli.get(cli.path(entity_path(tbl, "p1", "r1")), accept=JSON_FULL)
    ints = []
    doc = json.loads(raw.body, parse_int=lambda s: ints.append(s) or int(s))
    assert doc["l"] == "9007199254740993" and \
        doc["l@odata.type"] == "Edm.Int64"
    assert isinstance(doc["d"], float) and doc["d"] == 2.0
    assert "2" not in ints, "integral double written without '.': %r" % \
        raw.body
    assert "d@odata.type" not in doc and "f@odata.type" not in doc
    assert doc["n"] == "NaN" and doc["n@odata.type"] == "Edm.Double"
    assert doc["t"] == "2008-07-10T00:00:00Z" and \
        doc["t@odata.type"] == "Edm.DateTime"
    assert doc["g"] == "c9da6455-213d-42c9-9a79-3e9149a57833" and \
        doc["g@odata.type"] == "Edm.Guid"
    assert doc["x"] == "AQIDBA==" and doc["x@odata.type"] == "Edm.Binary"
    assert doc["i"] == 5 and "i@odata.type" not in doc
    assert doc["b"] is True and "b@odata.type" not in doc
    assert doc["s"] == "str" and "s@odata.type" not in doc


@pytest.mark.parametrize("value", [1e20, 1.23456789012346e24, 5e-324,
                                   123456789.0])
def test_double_never_written_as_integer(cli, tbl, value):
    """Large and integral doubles keep a '.' or exponent (§4.2, §12.5)."""
    rk = str(uuid.uuid4())
    assert cli.insert(tbl, {"PartitionKey": "dbl", "RowKey": rk,
                            "v@odata.type": "Edm.Double",
                            "v": value}).status == 201
    r = cli.get(cli.path(entity_path(tbl, "dbl", rk)), accept=JSON_NONE)
    doc = json.loads(r.body, parse_int=lambda s: ("INT", s))
    assert isinstance(doc["v"], float) and doc["v"] == value, r.body


def test_timestamp_and_etag_format(cli, tbl):
    """Timestamp in UTC with up to 7 digits; ETag header byte-identical to
    odata.etag and equal to W/"datetime'<Timestamp, ':' as %3A>'" (§4.3,
    §4.4)."""
    r = cli.get(cli.path(entity_path(tbl, "p1", "r1")))
    doc = r.json()
    assert TS_RE.match(doc["Timestamp"]), doc["Timestamp"]
    etag = r.header("ETag")
    assert etag == doc["odata.etag"]
    m = ETAG_RE.match(etag)
    assert m and m.group(1) == doc["Timestamp"].replace(":", "%3A"), etag


def test_insert_echo(cli, tbl, root):
    """Insert without Prefer: 201 with the echoed entity (Timestamp,
    odata.etag) and ETag, Location, DataServiceId headers; no
    Preference-Applied (§3.11)."""
    rk = "echo o'k"
    r = cli.insert(tbl, {"PartitionKey": "ins", "RowKey": rk, "a": 1,
                         "Timestamp": "2001-01-01T00:00:00Z",
                         "odata.metadata": "ignored", "z": None})
    assert r.status == 201, r
    assert r.header("Content-Type") == json_ct("minimalmetadata")
    doc = r.json()
    assert doc["odata.metadata"] == root + "/$metadata#%s/@Element" % tbl
    assert doc["RowKey"] == rk and doc["a"] == 1 and "z" not in doc
    assert doc["Timestamp"] != "2001-01-01T00:00:00Z"
    assert r.header("ETag") == doc["odata.etag"]
    assert r.header("Preference-Applied") is None
    want = root + "/%s(PartitionKey='ins',RowKey='%s')" % (
        tbl, urllib.parse.quote("echo o''k", safe="'"))
    for h in ("Location", "DataServiceId"):
        got = urllib.parse.unquote(r.header(h))
        assert got == urllib.parse.unquote(want), (h, r.header(h))


@pytest.mark.parametrize("prefer,status", [("return-no-content", 204),
                                           ("return-content", 201)])
def test_insert_prefer(cli, tbl, prefer, status):
    """Prefer on insert: 204 without a body or 201 with one, echoed in
    Preference-Applied; ETag and Location either way (§3.11)."""
    r = cli.insert(tbl, {"PartitionKey": "pref", "RowKey": prefer},
                   headers={"Prefer": prefer})
    assert r.status == status, r
    assert r.header("Preference-Applied") == prefer
    assert r.header("ETag") and r.header("Location")
    assert (r.body == b"") == (status == 204)


@pytest.mark.parametrize("prefer,status", [(None, 201),
                                           ("return-no-content", 204),
                                           ("return-content", 201)])
def test_create_table_prefer_and_location(cli, root, prefer, status):
    """Create Table: 201 with body or 204, Preference-Applied only when
    Prefer was sent, Location/DataServiceId {root}/Tables('name')."""
    name = tname("pref")
    r = cli.post(cli.path("/Tables"), {"TableName": name},
                 headers={"Prefer": prefer} if prefer else None)
    assert r.status == status, r
    assert r.header("Preference-Applied") == prefer
    want = root + "/Tables('%s')" % name
    assert r.header("Location") == want and r.header("DataServiceId") == want
    if status == 201:
        assert r.json() == {"odata.metadata":
                            root + "/$metadata#Tables/@Element",
                            "TableName": name}


def test_create_table_body_levels(cli, root):
    """Create Table echo at nometadata and fullmetadata (§3.2)."""
    name = tname("lvl")
    r = cli.post(cli.path("/Tables"), {"TableName": name}, accept=JSON_NONE)
    assert r.status == 201 and r.json() == {"TableName": name}, r
    name = tname("lvl")
    r = cli.post(cli.path("/Tables"), {"TableName": name}, accept=JSON_FULL)
    assert r.json() == {
        "odata.metadata": root + "/$metadata#Tables/@Element",
        "odata.type": "%s.Tables" % cli.account,
        "odata.id": root + "/Tables('%s')" % name,
        "odata.editLink": "Tables('%s')" % name, "TableName": name}


def test_query_tables_body_levels(cli, tbl, root):
    """Query Tables bodies per level (§3.1)."""
    q = "?$filter=" + urllib.parse.quote("TableName eq '%s'" % tbl)
    assert cli.get(cli.path("/Tables" + q), accept=JSON_NONE).json() == \
        {"value": [{"TableName": tbl}]}
    assert cli.get(cli.path("/Tables" + q), accept=JSON_MINIMAL).json() == \
        {"odata.metadata": root + "/$metadata#Tables",
         "value": [{"TableName": tbl}]}
    full = cli.get(cli.path("/Tables" + q), accept=JSON_FULL).json()
    assert full["value"] == [{
        "odata.type": "%s.Tables" % cli.account,
        "odata.id": root + "/Tables('%s')" % tbl,
        "odata.editLink": "Tables('%s')" % tbl, "TableName": tbl}]


@pytest.mark.parametrize("target", ["/Tables()", "/Tables"])
def test_tables_collection_forms(cli, tbl, target):
    r = cli.get(cli.path(target))
    assert r.status == 200 and tbl in [t["TableName"] for t in
                                       r.json()["value"]]


def test_get_single_table(cli, tbl):
    """GET /Tables('name') returns that table (§1.2)."""
    r = cli.get(cli.path("/Tables('%s')" % tbl))
    assert r.status == 200, r
    assert r.json()["TableName"] == tbl


def test_format_overrides_accept(cli, tbl):
    """$format wins over Accept (§2)."""
    fmt = urllib.parse.quote("application/json;odata=fullmetadata", safe="")
    r = cli.get(cli.path("/%s()?$format=%s" % (tbl, fmt)), accept=JSON_NONE)
    assert r.status == 200
    assert r.header("Content-Type") == json_ct("fullmetadata")
    fmt = urllib.parse.quote("application/json;odata=nometadata", safe="")
    r = cli.get(cli.path(entity_path(tbl, "p1", "r1") + "?$format=" + fmt),
                accept=JSON_FULL)
    assert r.header("Content-Type") == json_ct("nometadata")
    assert "odata.etag" not in r.json()


def test_unknown_format(cli, tbl):
    r = cli.get(cli.path("/%s()?$format=yaml" % tbl))
    assert r.status in (400, 415) and r.error_code, r


# ---------------------------------------------------------------- keys
@pytest.mark.parametrize("pred", [
    "(PartitionKey='p1',RowKey='r1')",
    "(PartitionKey='p1',%20RowKey='r1')",
    "(%20PartitionKey%20=%20'p1'%20,%20RowKey='r1'%20)",
    "(RowKey='r1',PartitionKey='p1')",
    "(PartitionKey=%27p1%27,RowKey=%27r1%27)",
    "%28PartitionKey%3D%27p1%27%2CRowKey%3D%27r1%27%29",
])
def test_key_predicate_forms(cli, tbl, pred):
    """Spacing, key order and percent-encoded quotes/parens all address
    the same entity; the signature is over the raw path (§1.2, §1.3)."""
    r = cli.get(cli.path("/%s%s" % (tbl, pred)))
    assert r.status == 200 and r.json()["RowKey"] == "r1", r


def test_table_name_case_in_url(cli, tbl):
    r = cli.get(cli.path(entity_path(tbl.upper(), "p1", "r1")))
    assert r.status == 200, r


@pytest.mark.parametrize("key", ["o'k", "it''s", "a b", "100%", "ü☃",
                                 "(x)", "a,b=c"])
def test_key_escaping_python_and_js_styles(cli, tbl, key):
    """The same key reached the Python way (quote everything) and the JS
    way (encodeURIComponent: ' ( ) literal) (§1.3)."""
    assert cli.insert(tbl, {"PartitionKey": "esc", "RowKey": key}).status \
        == 201
    py = entity_path(tbl, "esc", key)
    js = "/%s(PartitionKey='esc',RowKey='%s')" % (
        tbl, urllib.parse.quote(key.replace("'", "''"), safe="'()!*~"))
    for target in (py, js):
        r = cli.get(cli.path(target))
        assert r.status == 200 and r.json()["RowKey"] == key, (target, r)
        r = cli.get(cli.path(target), auth="lite")
        assert r.status == 200, (target, r)


# ---------------------------------------------------------------- verbs
def _etag(cli, tbl, pk, rk):
    return cli.get(cli.path(entity_path(tbl, pk, rk))).header("ETag")


def test_merge_verb(cli, tbl):
    """MERGE (the legacy verb) merges (§3.13)."""
    cli.insert(tbl, {"PartitionKey": "vb", "RowKey": "m", "a": 1})
    r = cli.request("MERGE", cli.path(entity_path(tbl, "vb", "m")),
                    body={"b": 2}, headers={"If-Match": "*"})
    assert r.status == 204 and r.header("ETag") and r.body == b"", r
    got = cli.get(cli.path(entity_path(tbl, "vb", "m"))).json()
    assert got["a"] == 1 and got["b"] == 2


@pytest.mark.parametrize("xm,expect", [
    ("MERGE", {"a": 1, "b": 2}), ("PUT", {"b": 2}), ("DELETE", None)])
def test_verb_tunnelling(cli, tbl, xm, expect):
    """POST + X-HTTP-Method: MERGE/PUT/DELETE acts as that verb; the
    signature is over POST (§2)."""
    rk = "x" + xm
    cli.insert(tbl, {"PartitionKey": "vb", "RowKey": rk, "a": 1})
    body = None if xm == "DELETE" else {"b": 2}
    r = cli.post(cli.path(entity_path(tbl, "vb", rk)), body,
                 headers={"X-HTTP-Method": xm, "If-Match": "*"})
    assert r.status == 204, r
    g = cli.get(cli.path(entity_path(tbl, "vb", rk)))
    if expect is None:
        assert g.status == 404
    else:
        assert {k: v for k, v in g.json().items() if k in "ab"} == expect


def test_upsert_without_if_match(cli, tbl):
    """PUT / PATCH / MERGE without If-Match: insert-or-replace/merge, 204
    with an ETag and no body (§3.15)."""
    for verb, rk in (("PUT", "u1"), ("PATCH", "u2"), ("MERGE", "u3")):
        r = cli.request(verb, cli.path(entity_path(tbl, "up", rk)),
                        body={"a": 1})
        assert r.status == 204 and r.header("ETag") and r.body == b"", r
        assert cli.get(cli.path(entity_path(tbl, "up", rk))).status == 200


def test_body_keys_disagree_with_url(cli, tbl):
    """Update body keys that differ from the URL: the URL wins (§3.12)."""
    r = cli.put(cli.path(entity_path(tbl, "url", "k")),
                {"PartitionKey": "body", "RowKey": "other", "v": 1})
    assert r.status in (204, 400), r
    if r.status == 204:
        assert cli.get(cli.path(entity_path(tbl, "url", "k"))).status == 200
        assert cli.get(cli.path(entity_path(tbl, "body", "other"))).status \
            == 404


def test_if_match_forms(cli, tbl):
    """If-Match: the ETag as returned, the same with ':' unencoded, '*';
    an empty If-Match is 412, a malformed one 400 InvalidInput (§3.12,
    §4.4)."""
    cli.insert(tbl, {"PartitionKey": "im", "RowKey": "1", "v": 0})
    path = cli.path(entity_path(tbl, "im", "1"))
    etag = _etag(cli, tbl, "im", "1")
    r = cli.put(path, {"v": 1}, headers={"If-Match": etag})
    assert r.status == 204, r
    etag = r.header("ETag")
    r = cli.put(path, {"v": 2}, headers={"If-Match":
                                         etag.replace("%3A", ":")})
    assert r.status == 204, r
    assert cli.put(path, {"v": 3}, headers={"If-Match": "*"}).status == 204
    r = cli.put(path, {"v": 4}, headers={"If-Match": ""})
    assert r.status == 412 and r.error_code == \
        "UpdateConditionNotSatisfied", r
    r = cli.put(path, {"v": 4}, headers={"If-Match": "garbage"})
    check_error(r, 400, "InvalidInput", None)


# ---------------------------------------------------------------- parsing
def test_annotation_before_or_after_value(cli, tbl):
    body = ('{"PartitionKey":"ann","RowKey":"1",'
            '"a@odata.type":"Edm.Int64","a":"5","b":"6",'
            '"b@odata.type":"Edm.Int64"}')
    assert cli.insert(tbl, body).status == 201
    doc = cli.get(cli.path(entity_path(tbl, "ann", "1"))).json()
    assert doc["a@odata.type"] == doc["b@odata.type"] == "Edm.Int64"
    assert (doc["a"], doc["b"]) == ("5", "6")


def test_unannotated_big_integer_is_double(cli, tbl):
    """An unannotated integer outside int32 is read as Edm.Double, never
    silently Int64 (§4.2)."""
    r = cli.insert(tbl, {"PartitionKey": "bigint", "RowKey": "1",
                         "v": 3000000000, "w": -2147483649})
    assert r.status == 201, r
    raw = cli.get(cli.path(entity_path(tbl, "bigint", "1")),
                  accept=JSON_FULL)
    doc = json.loads(raw.body, parse_int=lambda x: ("INT", x))
    assert doc["v"] == 3000000000.0 and doc["w"] == -2147483649.0, raw.body
    assert "v@odata.type" not in doc or doc["v@odata.type"] == "Edm.Double"


def test_lenient_annotated_values(cli, tbl):
    """Int32/Double from numeric strings, Boolean from "true" (§4.2: be
    lenient), and an Edm.String annotation on a key."""
    body = {"PartitionKey": "len", "RowKey": "1",
            "PartitionKey@odata.type": "Edm.String",
            "a@odata.type": "Edm.Int32", "a": "5",
            "d@odata.type": "Edm.Double", "d": "1.5",
            "b@odata.type": "Edm.Boolean", "b": "true"}
    r = cli.insert(tbl, body)
    assert r.status == 201, r
    doc = cli.get(cli.path(entity_path(tbl, "len", "1"))).json()
    assert (doc["a"], doc["d"], doc["b"]) == (5, 1.5, True)


def test_chunked_request_body(cli, tbl):
    """A chunked insert body is read whole (§2)."""
    body = json.dumps({"PartitionKey": "chunk", "RowKey": "1",
                       "s": "x" * 20000}).encode()
    conn = http.client.HTTPConnection(
        "127.0.0.1", cli.port, timeout=30)
    target = cli.path("/" + tbl)
    h = cli.headers_for("POST", target, body=body)
    h["Transfer-Encoding"] = "chunked"
    conn.request("POST", target, body=(body[i:i + 4096]
                                       for i in range(0, len(body), 4096)),
                 headers=h, encode_chunked=True)
    r = conn.getresponse()
    r.read()
    conn.close()
    assert r.status == 201
    assert len(cli.get(cli.path(entity_path(tbl, "chunk", "1"))).json()["s"]) \
        == 20000


def test_expect_100_continue(cluster, tbl):
    """Expect: 100-continue gets a 100 before the body, then 201."""
    target = "/%s/%s" % (cluster.account, tbl)
    body = json.dumps({"PartitionKey": "cont", "RowKey": "1"}).encode()
    date = rawhttp.http_date()
    hdrs = [("Host", "127.0.0.1:%d" % cluster.fe_port), ("x-ms-date", date),
            ("x-ms-version", "2019-02-02"), ("Accept", JSON_MINIMAL),
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(body))), ("Expect", "100-continue"),
            ("Authorization", rawhttp.shared_key("POST", target,
                                                 "application/json", date))]
    s = socket.create_connection(("127.0.0.1", cluster.fe_port), timeout=30)
    s.sendall(rawhttp.build_request("POST", target, hdrs))
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        c = s.recv(1)
        assert c, "connection closed after %r" % head
        head += c
    assert head.startswith(b"HTTP/1.1 100"), head
    s.sendall(body)
    r, _ = rawhttp.read_response(s, "POST")
    s.close()
    assert r.status == 201


def test_timeout_parameter_accepted(cli, tbl):
    assert cli.get(cli.path("/%s()?timeout=30" % tbl)).status == 200
    assert cli.get(cli.path("/Tables?timeout=5")).status == 200


# ---------------------------------------------------------------- queries
def _follow(cli, first_target, headers_fn):
    pages = []
    target = first_target
    while True:
        r = cli.get(target)
        assert r.status == 200, r
        pages.append(r)
        nxt = headers_fn(r)
        if not nxt:
            return pages
        sep = "&" if "?" in first_target else "?"
        target = first_target + sep + nxt


def _entity_cont(r):
    pk = r.header("x-ms-continuation-NextPartitionKey")
    rk = r.header("x-ms-continuation-NextRowKey")
    assert (pk is None) == (rk is None), r
    if pk is None:
        return None
    return "NextPartitionKey=%s&NextRowKey=%s" % (
        urllib.parse.quote(pk, safe=""), urllib.parse.quote(rk, safe=""))


def test_entity_continuation_headers(cli):
    """$top=2: both continuation headers on every page but the last; the
    pages join to the full, ordered result (§6.4)."""
    name = new_table(cli)
    keys = sorted(("pk%d" % (i % 3), "rk%02d" % i) for i in range(11))
    for pk, rk in keys:
        assert cli.insert(name, {"PartitionKey": pk, "RowKey": rk}).status \
            == 201
    pages = _follow(cli, cli.path("/%s()?$top=2" % name), _entity_cont)
    got = [(e["PartitionKey"], e["RowKey"]) for p in pages
           for e in p.json()["value"]]
    assert got == keys
    assert all(len(p.json()["value"]) <= 2 for p in pages)
    assert _entity_cont(pages[-1]) is None


def test_continuation_non_ascii_keys(cli):
    """Continuation tokens round-trip non-ASCII keys."""
    name = new_table(cli)
    keys = sorted([("ü%d" % i, "日本%d" % i) for i in range(5)] +
                  [("a b'c", "😀")])
    for pk, rk in keys:
        assert cli.insert(name, {"PartitionKey": pk, "RowKey": rk}).status \
            == 201
    pages = _follow(cli, cli.path("/%s()?$top=1" % name), _entity_cont)
    got = [(e["PartitionKey"], e["RowKey"]) for p in pages
           for e in p.json()["value"]]
    assert got == keys


def test_continuation_partition_only(cli, tbl):
    """NextPartitionKey without NextRowKey is tolerated (§6.4)."""
    r = cli.get(cli.path("/%s()?$top=2" % tbl))
    pk = r.header("x-ms-continuation-NextPartitionKey")
    assert pk
    r2 = cli.get(cli.path("/%s()?NextPartitionKey=%s" % (
        tbl, urllib.parse.quote(pk, safe=""))))
    assert r2.status == 200, r2
    r3 = cli.get(cli.path("/%s()?NextPartitionKey=%s&NextRowKey=" % (
        tbl, urllib.parse.quote(pk, safe=""))))
    assert r3.status == 200, r3


def test_continuation_bad_token(cli, tbl):
    r = cli.get(cli.path("/%s()?NextPartitionKey=%%21%%21garbage&"
                         "NextRowKey=x" % tbl))
    check_error(r, 400, "InvalidInput", None)


def test_table_continuation(cli):
    """Query Tables $top=1: x-ms-continuation-NextTableName until done."""
    for _ in range(3):
        new_table(cli)

    def cont(r):
        n = r.header("x-ms-continuation-NextTableName")
        return n and "NextTableName=" + urllib.parse.quote(n, safe="")
    full = [t["TableName"] for t in cli.get(cli.path("/Tables")).json()
            ["value"]]
    pages = _follow(cli, cli.path("/Tables?$top=1"), cont)
    got = [t["TableName"] for p in pages for t in p.json()["value"]]
    assert got == full and len(pages) >= 3


def test_top_clamped(cli, tbl):
    r = cli.get(cli.path("/%s()?$top=5000" % tbl))
    assert r.status == 200 and len(r.json()["value"]) <= 1000


def test_select_whitespace_and_star(cli, tbl):
    """$select trims names; '*' returns everything (§6.3)."""
    sel = urllib.parse.quote("s, i ,RowKey")
    doc = cli.get(cli.path(entity_path(tbl, "p1", "r1") + "?$select=" +
                           sel), accept=JSON_NONE).json()
    assert set(doc) == {"s", "i", "RowKey"}, doc
    doc = cli.get(cli.path(entity_path(tbl, "p1", "r1") + "?$select=*"),
                  accept=JSON_NONE).json()
    assert SAMPLE_PROPS <= set(doc), doc


def test_query_tables_select_ignored(cli, tbl):
    """$select on Query Tables is accepted and ignored (§3.1)."""
    r = cli.get(cli.path("/Tables?$select=TableName"))
    assert r.status == 200 and tbl in [t["TableName"] for t in
                                       r.json()["value"]], r


def test_empty_filter_is_no_filter(cli, tbl):
    r = cli.get(cli.path("/%s()?$filter=" % tbl))
    assert r.status == 200 and len(r.json()["value"]) >= 7, r


def test_prefer_ignored_on_update(cli, tbl):
    """Prefer is only for Create Table and Insert Entity: an update
    answers 204 without Preference-Applied (§2, §3.15)."""
    r = cli.put(cli.path(entity_path(tbl, "pref", "upd")), {"v": 1},
                headers={"Prefer": "return-content"})
    assert r.status == 204 and r.body == b"", r
    assert r.header("Preference-Applied") is None


def test_filter_plus_as_space(cli, tbl):
    """'+' in the query string is a space (§6.1)."""
    r = cli.get(cli.path("/%s()?$filter=PartitionKey+eq+'p1'" % tbl))
    assert r.status == 200 and len(r.json()["value"]) == 1, r


# ================================================================ auth
@pytest.mark.parametrize("delta,ok", [(-20 * 60, False), (20 * 60, False),
                                      (-14 * 60, True), (14 * 60, True)])
def test_clock_skew(cli, delta, ok):
    """Requests dated more than 15 minutes off: 403 AuthenticationFailed
    (§7)."""
    r = cli.get(cli.path("/Tables"), date=rawhttp.http_date(delta))
    if ok:
        assert r.status == 200, r
    else:
        check_error(r, 403, "AuthenticationFailed")


def test_date_header_instead_of_x_ms_date(cli):
    """Without x-ms-date the Date header is signed."""
    d = rawhttp.http_date()
    r = cli.get(cli.path("/Tables"), date="", headers={"Date": d},
                auth=rawhttp.shared_key("GET", cli.path("/Tables"), "", d))
    assert r.status == 200, r


def test_x_ms_date_wins_over_date(cli):
    """With both headers, x-ms-date is the signed one (§7.2, §12 item 8):
    a garbage Date header does not matter."""
    r = cli.get(cli.path("/Tables"), headers={"Date": "not a date"})
    assert r.status == 200, r


def test_no_date_fails(cli):
    r = cli.get(cli.path("/Tables"), date="")
    assert r.status == 403 and r.error_code == "AuthenticationFailed", r


def test_shared_key_lite(cli, tbl):
    """SharedKeyLite (the JS SDK's scheme) for reads, inserts, updates and
    deletes; a wrong Lite signature is 403 (§7.2)."""
    assert cli.get(cli.path("/Tables"), auth="lite").status == 200
    r = cli.insert(tbl, {"PartitionKey": "lite", "RowKey": "1"},
                   auth="lite")
    assert r.status == 201, r
    p = cli.path(entity_path(tbl, "lite", "1"))
    assert cli.put(p, {"v": 1}, auth="lite").status == 204
    assert cli.delete(p, auth="lite", headers={"If-Match": "*"}).status \
        == 204
    bad = rawhttp.shared_key_lite(cli.path("/Tables"), rawhttp.http_date(),
                                  key=base64.b64encode(b"q" * 32).decode())
    check_error(cli.get(cli.path("/Tables"), auth=bad), 403,
                "AuthenticationFailed")


def test_shared_key_content_type_signed(cli, tbl):
    """The Content-Type header is part of the SharedKey string to sign:
    signing another one fails."""
    target = cli.path("/" + tbl)
    d = rawhttp.http_date()
    r = cli.post(target, {"PartitionKey": "ct", "RowKey": "1"}, date=d,
                 auth=rawhttp.shared_key("POST", target, "text/plain", d))
    check_error(r, 403, "AuthenticationFailed")


def test_comp_in_canonical_resource(cli, tbl):
    """?comp= is part of the canonicalized resource; other parameters
    are not (§7.1)."""
    r = cli.get(cli.path("/%s?comp=acl" % tbl), accept=None)
    assert r.status == 200, r
    d = rawhttp.http_date()
    wrong = rawhttp.shared_key("GET", cli.path("/" + tbl), "", d)
    r = cli.get(cli.path("/%s?comp=acl" % tbl), date=d, auth=wrong,
                accept=None)
    assert r.status == 403, r


def test_host_style_addressing(cluster):
    """Host: devstoreaccount1.table.core.windows.net selects the account
    from the host; the path has no account segment (§1.1)."""
    host = "%s.table.core.windows.net" % cluster.account
    c = rawhttp.Client(cluster.fe_port)
    d = rawhttp.http_date()
    r = c.get("/Tables", date=d, headers={"Host": host},
              auth=rawhttp.shared_key("GET", "/Tables", "", d))
    c.close()
    assert r.status == 200, r
    assert r.json()["odata.metadata"] == "http://%s/$metadata#Tables" % host


@pytest.mark.parametrize("signed", ["as-sent", "primary"])
def test_secondary_read(cli, tbl, signed):
    """Reads on /account-secondary work, signed over the path as sent or
    without -secondary (§7.1, §12 item 9)."""
    target = "/%s-secondary%s" % (cli.account, entity_path(tbl, "p1", "r1"))
    st = target if signed == "as-sent" else cli.path(entity_path(tbl, "p1",
                                                                 "r1"))
    r = cli.get(target, sign_target=st)
    assert r.status == 200 and r.json()["RowKey"] == "r1", r


# ================================================================ XML ops
PROPS_XML = (
    '<?xml version="1.0" encoding="utf-8"?><StorageServiceProperties>'
    '<Logging><Version>1.0</Version><Delete>true</Delete><Read>false</Read>'
    '<Write>true</Write><RetentionPolicy><Enabled>true</Enabled><Days>7</Days>'
    '</RetentionPolicy></Logging>'
    '<HourMetrics><Version>1.0</Version><Enabled>true</Enabled>'
    '<IncludeAPIs>false</IncludeAPIs><RetentionPolicy><Enabled>false'
    '</Enabled></RetentionPolicy></HourMetrics>'
    '<MinuteMetrics><Version>1.0</Version><Enabled>false</Enabled>'
    '<RetentionPolicy><Enabled>false</Enabled></RetentionPolicy>'
    '</MinuteMetrics>'
    '<Cors><CorsRule><AllowedOrigins>https://ok.example</AllowedOrigins>'
    '<AllowedMethods>GET,PUT</AllowedMethods><AllowedHeaders>x-ms-meta-*,'
    'content-type</AllowedHeaders><ExposedHeaders>x-ms-request-id'
    '</ExposedHeaders><MaxAgeInSeconds>120</MaxAgeInSeconds></CorsRule>'
    '</Cors></StorageServiceProperties>')
XML_CT = "application/xml"


def test_service_properties_xml(cli):
    """PUT properties: 202, no body; GET: 200 application/xml with the
    values (§3.6)."""
    r = cli.put(cli.path("/?restype=service&comp=properties"), PROPS_XML,
                content_type=XML_CT, accept=None)
    assert r.status == 202 and r.body == b"", r
    check_common(r)
    r = cli.get(cli.path("/?restype=service&comp=properties"), accept=None)
    assert r.status == 200, r
    assert r.header("Content-Type").startswith("application/xml"), r
    root = ET.fromstring(r.body)
    assert root.tag == "StorageServiceProperties"
    assert root.findtext("Logging/Delete") == "true"
    assert root.findtext("Logging/RetentionPolicy/Days") == "7"
    assert root.findtext("HourMetrics/Enabled") == "true"
    rule = root.find("Cors/CorsRule")
    assert rule.findtext("AllowedOrigins") == "https://ok.example"
    assert rule.findtext("MaxAgeInSeconds") == "120"


def test_service_properties_partial_put(cli):
    """A PUT with only Cors keeps Logging (§3.6)."""
    cli.put(cli.path("/?restype=service&comp=properties"), PROPS_XML,
            content_type=XML_CT, accept=None)
    part = ('<?xml version="1.0" encoding="utf-8"?><StorageServiceProperties>'
            '<Cors><CorsRule><AllowedOrigins>*</AllowedOrigins>'
            '<AllowedMethods>GET</AllowedMethods><AllowedHeaders>'
            '</AllowedHeaders><ExposedHeaders></ExposedHeaders>'
            '<MaxAgeInSeconds>5</MaxAgeInSeconds></CorsRule></Cors>'
            '</StorageServiceProperties>')
    assert cli.put(cli.path("/?restype=service&comp=properties"), part,
                   content_type=XML_CT, accept=None).status == 202
    root = ET.fromstring(cli.get(cli.path(
        "/?restype=service&comp=properties"), accept=None).body)
    assert root.findtext("Logging/Delete") == "true"
    assert root.findtext("Cors/CorsRule/AllowedOrigins") == "*"
    cli.put(cli.path("/?restype=service&comp=properties"), PROPS_XML,
            content_type=XML_CT, accept=None)


@pytest.mark.parametrize("body", ["<notxml", "<Wrong/>",
                                  "<StorageServiceProperties><Cors>" +
                                  "<CorsRule><AllowedOrigins>*"
                                  "</AllowedOrigins><AllowedMethods>GET"
                                  "</AllowedMethods><MaxAgeInSeconds>1"
                                  "</MaxAgeInSeconds></CorsRule>" * 6 +
                                  "</Cors></StorageServiceProperties>"],
                         ids=["broken", "wrongroot", "sixrules"])
def test_service_properties_bad_xml(cli, body):
    r = cli.put(cli.path("/?restype=service&comp=properties"), body,
                content_type=XML_CT, accept=None)
    check_error(r, 400, "InvalidXmlDocument", xml=True)


def test_service_stats(cli):
    """Stats answer on the secondary address (§3.7); the primary refuses
    them with 400 InvalidQueryParameterValue, as Azure does."""
    r = cli.get("/%s/?restype=service&comp=stats" % cli.account, accept=None)
    check_error(r, 400, "InvalidQueryParameterValue", xml=True)
    target = "/%s-secondary/?restype=service&comp=stats" % cli.account
    r = cli.get(target, accept=None)
    assert r.status == 200, r
    root = ET.fromstring(r.body)
    assert root.tag == "StorageServiceStats"
    assert root.findtext("GeoReplication/Status") in ("live", "bootstrap",
                                                      "unavailable")
    assert email.utils.parsedate_to_datetime(
        root.findtext("GeoReplication/LastSyncTime"))


ACL_XML = ('<?xml version="1.0" encoding="utf-8"?><SignedIdentifiers>'
           '<SignedIdentifier><Id>policy1</Id><AccessPolicy>'
           '<Start>2024-01-01T00:00:00Z</Start>'
           '<Expiry>2034-02-01T00:00:00Z</Expiry>'
           '<Permission>raud</Permission></AccessPolicy></SignedIdentifier>'
           '<SignedIdentifier><Id>bare</Id></SignedIdentifier>'
           '</SignedIdentifiers>')


def test_acl_roundtrip(cli):
    """PUT ?comp=acl: 204; GET: 200 application/xml with the identifiers;
    an empty body clears the ACL (§3.4, §3.5)."""
    name = new_table(cli)
    path = cli.path("/%s?comp=acl" % name)
    r = cli.get(path, accept=None)
    assert r.status == 200 and r.header("Content-Type").startswith(
        "application/xml"), r
    assert ET.fromstring(r.body).tag == "SignedIdentifiers"
    assert list(ET.fromstring(r.body)) == []
    r = cli.put(path, ACL_XML, content_type=XML_CT, accept=None)
    assert r.status == 204 and r.body == b"", r
    root = ET.fromstring(cli.get(path, accept=None).body)
    ids = [si.findtext("Id") for si in root.findall("SignedIdentifier")]
    assert ids == ["policy1", "bare"]
    pol = root.find("SignedIdentifier/AccessPolicy")
    assert pol.findtext("Permission") == "raud"
    assert pol.findtext("Start").startswith("2024-01-01T00:00:00")
    r = cli.put(path, "", content_type=XML_CT, accept=None)
    assert r.status == 204, r
    assert list(ET.fromstring(cli.get(path, accept=None).body)) == []


@pytest.mark.parametrize("body", [
    "<SignedIdentifiers>" + "".join(
        "<SignedIdentifier><Id>i%d</Id></SignedIdentifier>" % i
        for i in range(6)) + "</SignedIdentifiers>",
    "<SignedIdentifiers><SignedIdentifier><Id>x</Id><AccessPolicy>"
    "<Permission>rwx</Permission></AccessPolicy></SignedIdentifier>"
    "</SignedIdentifiers>",
    "<SignedIdentifiers><SignedIdentifier><Id>" + "i" * 65 +
    "</Id></SignedIdentifier></SignedIdentifiers>",
    "<SignedIdentifiers><broken",
], ids=["sixids", "badperm", "longid", "broken"])
def test_acl_invalid(cli, tbl, body):
    """>5 identifiers, bad permissions, ids over 64 characters, bad XML:
    400 InvalidXmlDocument (§3.5)."""
    r = cli.put(cli.path("/%s?comp=acl" % tbl), body, content_type=XML_CT,
                accept=None)
    check_error(r, 400, "InvalidXmlDocument", xml=True)


def test_acl_sas_policy(cli):
    """A SAS with si= takes sp/se from the stored policy (§7.3)."""
    name = new_table(cli)
    cli.insert(name, {"PartitionKey": "a", "RowKey": "1"})
    assert cli.put(cli.path("/%s?comp=acl" % name), ACL_XML,
                   content_type=XML_CT, accept=None).status == 204
    sas = rawhttp.table_sas(name, sp="", start=False, expiry=False,
                            si="policy1")
    r = cli.get(cli.path(entity_path(name, "a", "1")) + "?" + sas,
                auth="none")
    assert r.status == 200, r
    # A field given both in the SAS and the policy: 403.
    sas = rawhttp.table_sas(name, sp="r", si="policy1", start=False,
                            expiry=False)
    r = cli.get(cli.path(entity_path(name, "a", "1")) + "?" + sas,
                auth="none")
    assert r.status == 403, r


# ---------------------------------------------------------------- CORS
def _set_cors(cli):
    assert cli.put(cli.path("/?restype=service&comp=properties"), PROPS_XML,
                   content_type=XML_CT, accept=None).status == 202


def test_preflight_missing_headers(cli):
    r = cli.request("OPTIONS", cli.path("/Tables"), auth="none",
                    headers={"Origin": "https://ok.example"})
    check_error(r, 400, "InvalidHeaderValue",
                "A required CORS header is not present.", xml=True)


def test_preflight_match(cli):
    """A preflight matching a rule: 200 with the Access-Control-* headers
    (§3.8)."""
    _set_cors(cli)
    r = cli.request("OPTIONS", cli.path("/Tables"), auth="none",
                    headers={"Origin": "https://ok.example",
                             "Access-Control-Request-Method": "PUT",
                             "Access-Control-Request-Headers":
                             "x-ms-meta-abc,content-type"})
    assert r.status == 200, r
    assert r.header("Access-Control-Allow-Origin") == "https://ok.example"
    assert "PUT" in r.header("Access-Control-Allow-Methods")
    assert "x-ms-meta-abc" in r.header("Access-Control-Allow-Headers")
    assert r.header("Access-Control-Max-Age") == "120"


@pytest.mark.parametrize("origin,method,hdrs", [
    ("https://evil.example", "GET", None),
    ("https://ok.example", "DELETE", None),
    ("https://ok.example", "GET", "x-other-header"),
])
def test_preflight_no_match(cli, origin, method, hdrs):
    _set_cors(cli)
    h = {"Origin": origin, "Access-Control-Request-Method": method}
    if hdrs:
        h["Access-Control-Request-Headers"] = hdrs
    r = cli.request("OPTIONS", cli.path("/Tables"), auth="none", headers=h)
    check_error(r, 403, "CorsPreflightFailure", xml=True)


def test_cors_headers_on_normal_response(cli):
    """A normal request with a matching Origin gets
    Access-Control-Allow-Origin, -Expose-Headers and Vary: Origin."""
    _set_cors(cli)
    r = cli.get(cli.path("/Tables"), headers={"Origin": "https://ok.example"})
    assert r.status == 200
    assert r.header("Access-Control-Allow-Origin") == "https://ok.example"
    assert r.header("Access-Control-Expose-Headers")
    assert "Origin" in (r.header("Vary") or "")
    r = cli.get(cli.path("/Tables"), headers={"Origin": "https://no.example"})
    assert r.header("Access-Control-Allow-Origin") is None


# ================================================================ $batch
def batch_body(root, table, parts, boundary="batch_B", cs="changeset_C",
               eol="\r\n", ids=True):
    """parts: (verb, url-suffix, headers dict, body or None)."""
    out = ["--" + boundary,
           "Content-Type: multipart/mixed; boundary=" + cs, ""]
    for i, (verb, suffix, hdrs, body) in enumerate(parts):
        out += ["--" + cs, "Content-Type: application/http",
                "Content-Transfer-Encoding: binary"]
        if ids:
            out.append("Content-ID: %d" % i)
        out += ["", "%s %s/%s%s HTTP/1.1" % (verb, root, table, suffix)]
        h = {"Accept": JSON_MINIMAL, "DataServiceVersion": "3.0"}
        if body is not None:
            h["Content-Type"] = "application/json"
        h.update(hdrs)
        out += ["%s: %s" % kv for kv in h.items()]
        out.append("")
        out.append(json.dumps(body) if body is not None else "")
    out += ["--" + cs + "--", "--" + boundary + "--", ""]
    return eol.join(out).encode()


def send_batch(cli, body, boundary="batch_B"):
    return cli.post(cli.path("/$batch"), body,
                    content_type="multipart/mixed; boundary=" + boundary,
                    accept="application/json")


def response_parts(r):
    """The HTTP responses inside a batch response: [(status, headers,
    body)]."""
    ct = r.header("Content-Type")
    m = re.match(r"multipart/mixed; *boundary=(batchresponse_\S+)", ct)
    assert m, ct
    text = r.body.decode()
    inner = re.search(r"boundary=(changesetresponse_[^\r\n;]+)", text)
    sep = "--" + (inner.group(1) if inner else m.group(1))
    parts = []
    for chunk in text.split(sep)[1:]:
        if chunk.startswith("--"):
            continue
        mm = re.search(r"HTTP/1.1 (\d{3}) [^\r\n]*\r?\n(.*?)\r?\n\r?\n(.*)",
                       chunk, re.S)
        if not mm:
            continue
        hdrs = dict(line.split(": ", 1) for line in
                    mm.group(2).splitlines() if ": " in line)
        parts.append((int(mm.group(1)), hdrs, mm.group(3).strip()))
    return parts


def test_batch_success_wire_format(cli, root):
    """202, multipart/mixed; boundary=batchresponse_…, one part per
    operation in order with HTTP/1.1 204, echoed Content-ID, 'ETag: ' in
    exactly that case (JS parses it), Preference-Applied (§5.3)."""
    name = new_table(cli)
    parts = [("POST", "", {"Prefer": "return-no-content"},
              {"PartitionKey": "b", "RowKey": str(i)}) for i in range(3)]
    r = send_batch(cli, batch_body(root, name, parts))
    assert r.status == 202, r
    check_common(r)
    assert b"--changesetresponse_" in r.body
    got = response_parts(r)
    assert [p[0] for p in got] == [204, 204, 204], r.body
    assert [p[1].get("Content-ID") for p in got] == ["0", "1", "2"]
    for _, hdrs, body in got:
        assert ETAG_RE.match(hdrs.get("ETag", "")), hdrs
        assert hdrs.get("Preference-Applied") == "return-no-content"
        assert body == ""
    assert b"\r\nETag: W/" in r.body


def test_batch_insert_returns_entity(cli, root):
    """An insert without Prefer inside a batch: 201 with the entity."""
    name = new_table(cli)
    r = send_batch(cli, batch_body(root, name, [
        ("POST", "", {}, {"PartitionKey": "b", "RowKey": "1", "v": 7})]))
    assert r.status == 202, r
    [(status, hdrs, body)] = response_parts(r)
    assert status == 201 and json.loads(body)["v"] == 7


def test_batch_failure_single_part(cli, root):
    """A failing operation: still 202, only the failing part, its real
    status, code, and message prefixed with its 0-based index (§5.4)."""
    name = new_table(cli)
    cli.insert(name, {"PartitionKey": "b", "RowKey": "x"})
    parts = [("POST", "", {"Prefer": "return-no-content"},
              {"PartitionKey": "b", "RowKey": "1"}),
             ("POST", "", {"Prefer": "return-no-content"},
              {"PartitionKey": "b", "RowKey": "x"})]
    r = send_batch(cli, batch_body(root, name, parts))
    assert r.status == 202, r
    got = response_parts(r)
    assert len(got) == 1, r.body
    status, hdrs, body = got[0]
    assert status == 409 and hdrs.get("Content-ID") == "1"
    err = json.loads(body)["odata.error"]
    assert err["code"] == "EntityAlreadyExists"
    assert err["message"]["value"].startswith(
        "1:The specified entity already exists.")
    assert cli.get(cli.path(entity_path(name, "b", "1"))).status == 404


@pytest.mark.parametrize("case,code,index", [
    ("partitions", "CommandsInBatchActOnDifferentPartitions", 1),
    ("duplicate", "InvalidDuplicateRow", 1),
])
def test_batch_validation_codes(cli, root, case, code, index):
    name = new_table(cli)
    if case == "partitions":
        ents = [{"PartitionKey": "a", "RowKey": "1"},
                {"PartitionKey": "b", "RowKey": "1"}]
    else:
        ents = [{"PartitionKey": "a", "RowKey": "1"},
                {"PartitionKey": "a", "RowKey": "1"}]
    r = send_batch(cli, batch_body(root, name, [
        ("POST", "", {}, e) for e in ents]))
    if r.status == 202:
        [(status, _, body)] = response_parts(r)
        err = json.loads(body)["odata.error"]
        assert status == 400 and err["code"] == code, body
        assert err["message"]["value"].startswith("%d:" % index), body
    else:
        check_error(r, 400, code, None)


def test_batch_too_many_operations(cli, root):
    name = new_table(cli)
    parts = [("POST", "", {}, {"PartitionKey": "a", "RowKey": str(i)})
             for i in range(101)]
    r = send_batch(cli, batch_body(root, name, parts))
    if r.status == 202:
        [(status, _, body)] = response_parts(r)
        assert status == 400 and \
            json.loads(body)["odata.error"]["code"] == "InvalidInput"
    else:
        check_error(r, 400, "InvalidInput", None)


def test_batch_single_get(cli, root, tbl):
    """A batch holding exactly one GET: 200 part with the entity (§5.3)."""
    body = "\r\n".join([
        "--batch_B", "Content-Type: application/http",
        "Content-Transfer-Encoding: binary", "",
        "GET %s/%s HTTP/1.1" % (root, entity_path(tbl, "p1", "r1")[1:]),
        "Accept: application/json;odata=minimalmetadata", "", "",
        "--batch_B--", ""]).encode()
    r = send_batch(cli, body)
    assert r.status == 202, r
    text = r.body.decode()
    assert "HTTP/1.1 200" in text, text
    assert '"RowKey":"r1"' in text.replace(" ", ""), text


def test_batch_every_inner_verb(cli, root):
    """Inner POST, PUT, MERGE, PATCH and DELETE, with and without
    If-Match, in one changeset (§5.1): statuses in order, effects
    applied."""
    name = new_table(cli)
    for rk in ("put", "merge", "patch", "del", "cond"):
        assert cli.insert(name, {"PartitionKey": "v", "RowKey": rk,
                                 "a": 1}).status == 201
    etag = cli.get(cli.path(entity_path(name, "v", "cond"))).header("ETag")

    def u(rk):
        return "(PartitionKey='v',RowKey='%s')" % rk
    parts = [
        ("POST", "", {"Prefer": "return-no-content"},
         {"PartitionKey": "v", "RowKey": "new"}),
        ("PUT", u("put"), {"If-Match": "*"}, {"b": 2}),
        ("MERGE", u("merge"), {"If-Match": "*"}, {"b": 2}),
        ("PATCH", u("patch"), {}, {"b": 2}),
        ("DELETE", u("del"), {"If-Match": "*"}, None),
        ("PUT", u("cond"), {"If-Match": etag}, {"c": 3}),
        ("PUT", u("upsert"), {}, {"d": 4}),
    ]
    r = send_batch(cli, batch_body(root, name, parts))
    assert r.status == 202, r
    assert [p[0] for p in response_parts(r)] == [204] * 7, r.body
    got = {e["RowKey"]: {k: v for k, v in e.items() if k in "abcd"}
           for e in cli.get(cli.path("/%s()" % name)).json()["value"]}
    assert got == {"new": {}, "put": {"b": 2}, "merge": {"a": 1, "b": 2},
                   "patch": {"a": 1, "b": 2}, "cond": {"c": 3},
                   "upsert": {"d": 4}}, got


def test_batch_failure_index_zero_and_last(cli, root):
    """The failing operation's index prefixes the message whether it is
    the first or the last (§5.4)."""
    name = new_table(cli)
    cli.insert(name, {"PartitionKey": "x", "RowKey": "dup"})
    for parts, index in (
            ([("POST", "", {}, {"PartitionKey": "x", "RowKey": "dup"}),
              ("POST", "", {}, {"PartitionKey": "x", "RowKey": "n1"})], 0),
            ([("POST", "", {}, {"PartitionKey": "x", "RowKey": "n%d" % i})
              for i in range(9)] +
             [("POST", "", {}, {"PartitionKey": "x", "RowKey": "dup"})], 9)):
        r = send_batch(cli, batch_body(root, name, parts))
        assert r.status == 202, r
        [(status, _, body)] = response_parts(r)
        msg = json.loads(body)["odata.error"]["message"]["value"]
        assert status == 409 and msg.startswith("%d:" % index), body
    assert len(cli.get(cli.path("/%s()" % name)).json()["value"]) == 1


def test_batch_lf_only(cli, root):
    """Bare-LF line endings are accepted (§5.1)."""
    name = new_table(cli)
    r = send_batch(cli, batch_body(root, name, [
        ("POST", "", {"Prefer": "return-no-content"},
         {"PartitionKey": "a", "RowKey": "1"})], eol="\n"))
    assert r.status == 202, r
    assert cli.get(cli.path(entity_path(name, "a", "1"))).status == 200


def test_batch_other_boundary_names(cli, root):
    """Boundaries come from Content-Type parameters, whatever their
    names (§5.1)."""
    name = new_table(cli)
    body = batch_body(root, name, [("POST", "", {}, {"PartitionKey": "a",
                                                     "RowKey": "1"})],
                      boundary="outer-123", cs="inner_xyz", ids=False)
    r = send_batch(cli, body, boundary="outer-123")
    assert r.status == 202, r
    assert cli.get(cli.path(entity_path(name, "a", "1"))).status == 200


def test_batch_two_changesets(cli, root):
    """Two changesets in one batch: 400 (§5.2)."""
    name = new_table(cli)
    one = batch_body(root, name, [("POST", "", {}, {"PartitionKey": "a",
                                                    "RowKey": "1"})])
    two = batch_body(root, name, [("POST", "", {}, {"PartitionKey": "a",
                                                    "RowKey": "2"})],
                     cs="changeset_D")
    # --batch_B / changeset C ... / changeset D ... / --batch_B--
    end = b"--batch_B--\r\n"
    assert one.endswith(end)
    body = one[:-len(end)] + two
    assert body.count(b"Content-Type: multipart/mixed") == 2
    r = send_batch(cli, body)
    assert r.status == 400 or (r.status == 202 and response_parts(r)[0][0]
                               == 400), r
    assert cli.get(cli.path(entity_path(name, "a", "1"))).status == 404


def test_batch_wrong_content_type(cli):
    r = cli.post(cli.path("/$batch"), b"{}", content_type="application/json")
    assert 400 <= r.status < 500 and r.error_code, r
    check_error(r, r.status, r.error_code)


def test_batch_too_large(cli, root):
    name = new_table(cli)
    parts = [("POST", "", {}, {"PartitionKey": "a", "RowKey": str(i),
                               "s": "x" * 30000, "t": "y" * 30000})
             for i in range(80)]
    check_error(send_batch(cli, batch_body(root, name, parts)), 413,
                "RequestBodyTooLarge")


def test_batch_sas_signed(cli, root):
    """A batch authorised by a table SAS in the outer URL (§7.3)."""
    name = new_table(cli)
    sas = rawhttp.table_sas(name, sp="a")
    body = batch_body(root, name, [("POST", "", {}, {"PartitionKey": "a",
                                                     "RowKey": "1"})])
    r = cli.post(cli.path("/$batch?" + sas), body, auth="none",
                 content_type="multipart/mixed; boundary=batch_B")
    assert r.status == 202, r
    assert [p[0] for p in response_parts(r)] == [201]
