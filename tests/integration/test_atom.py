"""AtomPub (x-ms-version 2009-09-19 .. 2015-04-05) over raw HTTP, signed
with SharedKey / SharedKeyLite by rawhttp.py, against a real cluster:
docs/table-api-spec.md §10 and the REST reference's AtomPub examples.

- Create Table / Query Tables / Get Table as Atom entries and feeds;
- Insert / Get / Update / Merge / Upsert / Delete Entity with Atom bodies
  and responses, a round trip of every EDM type, m:null, $select's m:null;
- Query Entities as a feed with $filter, $top and continuation headers;
- the default format of those versions (no Accept, */*) and $format;
- Atom error bodies, and 415 for Atom from 2015-12-11 on;
- an Atom $batch change set (success and atomic failure);
- hostile XML: malformed, DOCTYPE, billion laughs, external entities,
  wrong namespaces, unknown m:type, deep nesting, an oversized body.
"""

import base64
import math
import re
import time
import xml.etree.ElementTree as ET

import pytest

import rawhttp

V = "2013-08-15"  # the last JSON-capable Atom versions, and the usual one
V_OLD = "2009-09-19"
ATOM = "http://www.w3.org/2005/Atom"
D = "http://schemas.microsoft.com/ado/2007/08/dataservices"
M = "http://schemas.microsoft.com/ado/2007/08/dataservices/metadata"
SCHEME = "http://schemas.microsoft.com/ado/2007/08/dataservices/scheme"
NS = {"a": ATOM, "d": D, "m": M}
ACCEPT = "application/atom+xml,application/xml"
CT = "application/atom+xml"
TS_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{7}Z$")
_seq = iter(range(10 ** 6))


def tname(prefix="atom"):
    return "%s%05d" % (prefix, next(_seq))


def entry(props, extra_ns=""):
    """An Atom request entry; @props: list of (name, value, type|None,
    null) or raw XML strings."""
    out = []
    for p in props:
        if isinstance(p, str):
            out.append(p)
            continue
        name, value, typ, null = (list(p) + [None, None])[:4]
        attrs = ""
        if typ:
            attrs += ' m:type="%s"' % typ
        if null:
            attrs += ' m:null="true"'
        if value is None:
            out.append("<d:%s%s />" % (name, attrs))
        else:
            out.append("<d:%s%s>%s</d:%s>" % (
                name, attrs,
                value.replace("&", "&amp;").replace("<", "&lt;"), name))
    return ('<?xml version="1.0" encoding="utf-8" standalone="yes"?>'
            '<entry xmlns:d="%s" xmlns:m="%s" xmlns="%s"%s>'
            '<title /><updated>2009-03-18T11:48:34.9840639-07:00</updated>'
            '<author><name /></author><id />'
            '<content type="application/xml"><m:properties>%s'
            '</m:properties></content></entry>' % (D, M, ATOM, extra_ns,
                                                   "".join(out)))


@pytest.fixture(scope="module")
def cli(cluster):
    c = rawhttp.Client(cluster.fe_port)
    yield c
    c.close()


def req(cli, verb, rest, body=None, version=V, accept=ACCEPT,
        content_type=None, **kw):
    if body is not None and content_type is None:
        content_type = CT
    return cli.request(verb, cli.path(rest), body=body, version=version,
                       accept=accept, content_type=content_type, **kw)


def xml_of(r):
    return ET.fromstring(r.body)


def props_of(e):
    """{name: (text, m:type, m:null)} of an Atom entry element."""
    ps = e.find("a:content/m:properties", NS)
    out = {}
    for c in ps:
        assert c.tag.startswith("{%s}" % D), c.tag
        out[c.tag[len(D) + 2:]] = (c.text or "", c.get("{%s}type" % M),
                                   c.get("{%s}null" % M))
    return out


def atom_error(r, status, code):
    assert r.status == status, r
    assert r.header("Content-Type") == "application/xml", r
    assert r.header("x-ms-error-code") == code, r
    doc = xml_of(r)
    assert doc.tag == "{%s}error" % M, r.body
    assert doc.find("m:code", NS).text == code
    msg = doc.find("m:message", NS)
    assert msg.get("{http://www.w3.org/XML/1998/namespace}lang") == "en-US"
    assert "RequestId:" in msg.text
    return msg.text


def create_table(cli, name=None, version=V):
    name = name or tname()
    body = entry([("TableName", name)])
    r = req(cli, "POST", "/Tables", body, version=version)
    assert r.status == 201, r
    return name, r


# ------------------------------------------------------------ tables
def test_create_table_entry(cli):
    name, r = create_table(cli)
    assert r.header("Content-Type") == \
        "application/atom+xml;type=entry;charset=utf-8"
    assert r.header("Location") == "%s/Tables('%s')" % (cli.root, name)
    e = xml_of(r)
    assert e.tag == "{%s}entry" % ATOM
    assert e.get("{http://www.w3.org/XML/1998/namespace}base") == \
        cli.root + "/"
    assert e.find("a:id", NS).text == "%s/Tables('%s')" % (cli.root, name)
    link = e.find("a:link", NS)
    assert (link.get("rel"), link.get("title"), link.get("href")) == \
        ("edit", "Tables", "Tables('%s')" % name)
    cat = e.find("a:category", NS)
    assert cat.get("term") == "%s.Tables" % cli.account
    assert cat.get("scheme") == SCHEME
    assert e.find("a:author/a:name", NS) is not None
    assert props_of(e) == {"TableName": (name, None, None)}
    # again: 409 TableAlreadyExists as an Atom error
    r = req(cli, "POST", "/Tables", entry([("TableName", name)]))
    atom_error(r, 409, "TableAlreadyExists")


def test_create_table_bad_names(cli):
    r = req(cli, "POST", "/Tables", entry([("TableName", "1bad")]))
    atom_error(r, 400, "InvalidResourceName")
    r = req(cli, "POST", "/Tables", entry([("Other", "x")]))
    atom_error(r, 400, "PropertiesNeedValue")


def test_query_tables_feed(cli):
    names = sorted(create_table(cli, tname("atomqt"))[0] for _ in range(3))
    r = req(cli, "GET", "/Tables?$filter=" +
            rawhttp.urllib.parse.quote("TableName ge 'atomqt' and "
                                       "TableName lt 'atomqu'"))
    assert r.status == 200, r
    assert r.header("Content-Type") == \
        "application/atom+xml;type=feed;charset=utf-8"
    f = xml_of(r)
    assert f.tag == "{%s}feed" % ATOM
    assert f.find("a:title", NS).text == "Tables"
    assert f.find("a:id", NS).text == cli.root + "/Tables"
    assert f.find("a:link", NS).get("rel") == "self"
    got = [props_of(e)["TableName"][0] for e in f.findall("a:entry", NS)]
    assert got == names
    # $top: continuation header, same as JSON
    r = req(cli, "GET", "/Tables?$top=1")
    assert len(xml_of(r).findall("a:entry", NS)) == 1
    assert r.header("x-ms-continuation-NextTableName")


def test_get_table_entry(cli):
    name, _ = create_table(cli)
    r = req(cli, "GET", "/Tables('%s')" % name)
    assert r.status == 200, r
    assert props_of(xml_of(r))["TableName"][0] == name
    r = req(cli, "GET", "/Tables('nosuchtable1')")
    atom_error(r, 404, "ResourceNotFound")


# ------------------------------------------------------------ entities
EVERY = [
    ("PartitionKey", "pk"), ("RowKey", "rk"),
    ("Str", "hello <&> \"' world"), ("StrT", "typed", "Edm.String"),
    ("Empty", ""),
    ("Bin", base64.b64encode(b"\x00\x01\xfe\xff").decode(), "Edm.Binary"),
    ("BoolT", "true", "Edm.Boolean"), ("BoolF", "false", "Edm.Boolean"),
    ("Bool1", "1", "Edm.Boolean"),
    ("Dt", "2008-07-10T00:00:00Z", "Edm.DateTime"),
    ("Dbl", "1.5", "Edm.Double"), ("DblInt", "2", "Edm.Double"),
    ("Nan", "NaN", "Edm.Double"), ("Inf", "INF", "Edm.Double"),
    ("NInf", "-INF", "Edm.Double"),
    ("G", "c9da6455-213d-42c9-9a79-3e9149a57833", "Edm.Guid"),
    ("I32", "-2147483648", "Edm.Int32"),
    ("I64", "9223372036854775807", "Edm.Int64"),
    ("Unicode", "\u00e9\u4e2d\U0001f600"),
    ("Gone", None, "Edm.Binary", True),
]
EXPECT = {
    "PartitionKey": ("pk", None), "RowKey": ("rk", None),
    "Str": ("hello <&> \"' world", None), "StrT": ("typed", None),
    "Empty": ("", None),
    "Bin": ("AAH+/w==", "Edm.Binary"),
    "BoolT": ("true", "Edm.Boolean"), "BoolF": ("false", "Edm.Boolean"),
    "Bool1": ("true", "Edm.Boolean"),
    "Dt": ("2008-07-10T00:00:00Z", "Edm.DateTime"),
    "Dbl": ("1.5", "Edm.Double"), "DblInt": ("2", "Edm.Double"),
    "Nan": ("NaN", "Edm.Double"), "Inf": ("INF", "Edm.Double"),
    "NInf": ("-INF", "Edm.Double"),
    "G": ("c9da6455-213d-42c9-9a79-3e9149a57833", "Edm.Guid"),
    "I32": ("-2147483648", "Edm.Int32"),
    "I64": ("9223372036854775807", "Edm.Int64"),
    "Unicode": ("\u00e9\u4e2d\U0001f600", None),
}


def check_entity(cli, e, table, pk, rk, expect):
    assert e.tag == "{%s}entry" % ATOM
    path = "%s(PartitionKey='%s',RowKey='%s')" % (table, pk, rk)
    assert e.find("a:id", NS).text == cli.root + "/" + path
    link = e.find("a:link", NS)
    assert (link.get("rel"), link.get("title"), link.get("href")) == \
        ("edit", table, path)
    assert e.find("a:category", NS).get("term") == \
        "%s.%s" % (cli.account, table)
    assert rawhttp.ETAG_RE.match(e.get("{%s}etag" % M)), e.attrib
    got = props_of(e)
    ts = got.pop("Timestamp")
    assert TS_RE.match(ts[0]) and ts[1] == "Edm.DateTime"
    assert {k: v[:2] for k, v in got.items()} == expect


def test_every_edm_type_round_trip(cli):
    t, _ = create_table(cli)
    r = req(cli, "POST", "/" + t, entry(EVERY))
    assert r.status == 201, r
    assert r.header("Content-Type") == \
        "application/atom+xml;type=entry;charset=utf-8"
    etag = r.header("ETag")
    e = xml_of(r)
    assert e.get("{%s}etag" % M) == etag
    check_entity(cli, e, t, "pk", "rk", EXPECT)
    r = req(cli, "GET", "/%s(PartitionKey='pk',RowKey='rk')" % t)
    assert r.status == 200, r
    assert r.header("ETag") == etag
    check_entity(cli, xml_of(r), t, "pk", "rk", EXPECT)
    # the same entity read as JSON (2015-04-05 + explicit JSON Accept):
    # the Atom body made the same typed entity a JSON body would
    r = req(cli, "GET", "/%s(PartitionKey='pk',RowKey='rk')" % t,
            version="2015-04-05", accept=rawhttp.JSON_FULL)
    j = r.json()
    assert j["I64@odata.type"] == "Edm.Int64" and \
        j["I64"] == "9223372036854775807"
    assert j["I32"] == -2147483648 and j["BoolT"] is True
    assert math.isnan(float(j["Nan"])) and j["Inf"] == "Infinity"
    assert j["Bin"] == "AAH+/w==" and j["G@odata.type"] == "Edm.Guid"
    assert j["Dt"] == "2008-07-10T00:00:00Z" and "Gone" not in j


def test_update_merge_delete(cli):
    t, _ = create_table(cli)
    key = "/%s(PartitionKey='p',RowKey='r')" % t
    r = req(cli, "POST", "/" + t, entry([("PartitionKey", "p"),
                                         ("RowKey", "r"), ("a", "1"),
                                         ("b", "2", "Edm.Int32")]))
    assert r.status == 201, r
    etag = r.header("ETag")
    # Update (PUT) with If-Match: replaces
    r = req(cli, "PUT", key, entry([("c", "3", "Edm.Int64")]),
            headers={"If-Match": etag})
    assert r.status == 204, r
    new = r.header("ETag")
    assert new != etag
    r = req(cli, "PUT", key, entry([("c", "4")]), headers={"If-Match": etag})
    atom_error(r, 412, "UpdateConditionNotSatisfied")
    # Merge (verb tunnelled) adds
    r = req(cli, "POST", key, entry([("d", "x")]),
            headers={"X-HTTP-Method": "MERGE", "If-Match": "*"})
    assert r.status == 204, r
    got = props_of(xml_of(req(cli, "GET", key)))
    assert {k: v[:2] for k, v in got.items() if k != "Timestamp"} == {
        "PartitionKey": ("p", None), "RowKey": ("r", None),
        "c": ("3", "Edm.Int64"), "d": ("x", None)}
    # Insert-or-replace / insert-or-merge (no If-Match, >= 2011-08-18)
    key2 = "/%s(PartitionKey='p',RowKey='u')" % t
    r = req(cli, "PUT", key2, entry([("e", "1.25", "Edm.Double")]))
    assert r.status == 204, r
    r = req(cli, "MERGE", key2, entry([("f", "true", "Edm.Boolean")]))
    assert r.status == 204, r
    got = props_of(xml_of(req(cli, "GET", key2)))
    assert got["e"][:2] == ("1.25", "Edm.Double")
    assert got["f"][:2] == ("true", "Edm.Boolean")
    # Delete
    r = req(cli, "DELETE", key, headers={"If-Match": "*"})
    assert r.status == 204, r
    r = req(cli, "GET", key)
    atom_error(r, 404, "ResourceNotFound")


def test_insert_conflict_and_prefer(cli):
    t, _ = create_table(cli)
    body = entry([("PartitionKey", "p"), ("RowKey", "r")])
    r = req(cli, "POST", "/" + t, body,
            headers={"Prefer": "return-no-content"})
    assert r.status == 204 and r.body == b"", r
    assert r.header("Preference-Applied") == "return-no-content"
    r = req(cli, "POST", "/" + t, body)
    atom_error(r, 409, "EntityAlreadyExists")


def test_query_entities_feed(cli):
    t, _ = create_table(cli)
    for i in range(5):
        r = req(cli, "POST", "/" + t, entry([
            ("PartitionKey", "p"), ("RowKey", "r%d" % i),
            ("n", str(i), "Edm.Int32")]))
        assert r.status == 201, r
    q = rawhttp.urllib.parse.quote("n ge 1")
    r = req(cli, "GET", "/%s()?$filter=%s&$top=2" % (t, q))
    assert r.status == 200, r
    assert r.header("Content-Type") == \
        "application/atom+xml;type=feed;charset=utf-8"
    f = xml_of(r)
    assert f.find("a:title", NS).text == t
    assert f.find("a:id", NS).text == "%s/%s" % (cli.root, t)
    ents = f.findall("a:entry", NS)
    assert [props_of(e)["RowKey"][0] for e in ents] == ["r1", "r2"]
    for e in ents:
        assert rawhttp.ETAG_RE.match(e.get("{%s}etag" % M))
    npk = r.header("x-ms-continuation-NextPartitionKey")
    nrk = r.header("x-ms-continuation-NextRowKey")
    assert npk and nrk
    r = req(cli, "GET", "/%s()?$filter=%s&NextPartitionKey=%s&NextRowKey=%s"
            % (t, q, npk, nrk))
    rows = [props_of(e)["RowKey"][0]
            for e in xml_of(r).findall("a:entry", NS)]
    assert rows == ["r3", "r4"]
    # $select: a requested but absent property is m:null
    r = req(cli, "GET", "/%s()?$select=n,missing&$top=1" % t)
    p = props_of(xml_of(r).find("a:entry", NS))
    assert p == {"n": ("0", "Edm.Int32", None),
                 "missing": ("", None, "true")}
    # empty result: a feed without entries
    r = req(cli, "GET", "/%s()?$filter=%s" % (
        t, rawhttp.urllib.parse.quote("n gt 100")))
    assert r.status == 200 and xml_of(r).findall("a:entry", NS) == []


# ------------------------------------------------------------ negotiation
def test_default_format_by_version(cli):
    t, _ = create_table(cli)
    for v in (V_OLD, "2011-08-18", V, "2015-04-05"):
        for accept in (None, "*/*"):
            r = req(cli, "GET", "/%s()" % t, version=v, accept=accept)
            assert r.status == 200, r
            assert r.header("Content-Type").startswith(
                "application/atom+xml;type=feed"), (v, accept, r)
    # JSON needs an explicit Accept (and >= 2013-08-15)
    r = req(cli, "GET", "/%s()" % t, accept=rawhttp.JSON_MINIMAL)
    assert r.header("Content-Type").startswith("application/json"), r
    r = req(cli, "GET", "/%s()" % t, version="2012-02-12",
            accept=rawhttp.JSON_MINIMAL)
    atom_error(r, 415, "JsonFormatNotSupported")
    # $format wins over Accept
    r = req(cli, "GET", "/%s()?$format=atom" % t, accept=rawhttp.JSON_MINIMAL)
    assert r.header("Content-Type").startswith("application/atom+xml"), r
    r = req(cli, "GET", "/%s()?$format=json" % t, accept=ACCEPT)
    assert r.header("Content-Type").startswith("application/json"), r
    # 2015-12-11 and later: Atom refused (JSON error), JSON the default
    for v in ("2015-12-11", "2019-02-02"):
        r = req(cli, "GET", "/%s()" % t, version=v)
        assert (r.status, r.error_code) == (415, "AtomFormatNotSupported")
        assert r.header("Content-Type").startswith("application/json")
        r = req(cli, "POST", "/" + t, entry([("PartitionKey", "a"),
                                             ("RowKey", "b")]),
                version=v, accept=rawhttp.JSON_MINIMAL)
        assert (r.status, r.error_code) == (415, "AtomFormatNotSupported")
        r = req(cli, "GET", "/%s()" % t, version=v, accept=None)
        assert r.header("Content-Type").startswith("application/json"), r


def test_shared_key_lite_and_old_version(cli):
    name, r = create_table(cli, version=V_OLD)
    r = req(cli, "POST", "/" + name, entry([("PartitionKey", "p"),
                                            ("RowKey", "r")]),
            version=V_OLD, auth="lite")
    assert r.status == 201, r
    r = req(cli, "GET", "/%s(PartitionKey='p',RowKey='r')" % name,
            version=V_OLD, auth="lite", accept=None)
    assert r.status == 200 and props_of(xml_of(r))["RowKey"][0] == "r"


def test_documented_insert_example(cli):
    """The Insert Entity AtomPub request of the REST reference (customer
    entity), and its documented response shape."""
    t, _ = create_table(cli)
    body = ('<?xml version="1.0" encoding="utf-8" standalone="yes"?>\n'
            '<entry xmlns:d="%s" xmlns:m="%s" xmlns="%s">\n'
            '  <title />\n  <updated>2008-09-18T23:46:19.3857256Z</updated>\n'
            '  <author>\n    <name />\n  </author>\n  <id />\n'
            '  <content type="application/xml">\n    <m:properties>\n'
            '      <d:Address>Mountain View</d:Address>\n'
            '      <d:Age m:type="Edm.Int32">23</d:Age>\n'
            '      <d:AmountDue m:type="Edm.Double">200.23</d:AmountDue>\n'
            '      <d:CustomerCode m:type="Edm.Guid">'
            'c9da6455-213d-42c9-9a79-3e9149a57833</d:CustomerCode>\n'
            '      <d:CustomerSince m:type="Edm.DateTime">'
            '2008-07-10T00:00:00</d:CustomerSince>\n'
            '      <d:IsActive m:type="Edm.Boolean">true</d:IsActive>\n'
            '      <d:NumOfOrders m:type="Edm.Int64">255</d:NumOfOrders>\n'
            '      <d:PartitionKey>mypartitionkey</d:PartitionKey>\n'
            '      <d:RowKey>myrowkey1</d:RowKey>\n'
            '    </m:properties>\n  </content>\n</entry>') % (D, M, ATOM)
    r = req(cli, "POST", "/" + t, body)
    assert r.status == 201, r
    p = props_of(xml_of(r))
    assert p["Age"][:2] == ("23", "Edm.Int32")
    assert p["AmountDue"][:2] == ("200.23", "Edm.Double")
    assert p["CustomerSince"][:2] == ("2008-07-10T00:00:00Z", "Edm.DateTime")
    assert p["NumOfOrders"][:2] == ("255", "Edm.Int64")
    assert p["Address"][:2] == ("Mountain View", None)


# ------------------------------------------------------------ bad input
def test_bad_values_same_errors_as_json(cli):
    t, _ = create_table(cli)
    base = [("PartitionKey", "p"), ("RowKey", "r")]
    cases = [
        ([("x", "abc", "Edm.Int32")], 400, "InvalidInput"),
        ([("x", "2147483648", "Edm.Int32")], 400, "InvalidInput"),
        ([("x", "zz", "Edm.Guid")], 400, "InvalidInput"),
        ([("x", "not base64!", "Edm.Binary")], 400, "InvalidInput"),
        ([("x", "maybe", "Edm.Boolean")], 400, "InvalidInput"),
        ([("x", "1", "Edm.Decimal")], 400, "InvalidInput"),
        ([("x", "1600-01-01T00:00:00Z", "Edm.DateTime")], 400,
         "OutOfRangeInput"),
        ([("x", "1"), ("x", "2")], 400, "DuplicatePropertiesSpecified"),
        (["<d:_bad-name>1</d:_bad-name>"], 400, "PropertyNameInvalid"),
        ([("p%d" % i, "v") for i in range(253)], 400, "TooManyProperties"),
        ([("s", "x" * 40000)], 400, "PropertyValueTooLarge"),
    ]
    for props, status, code in cases:
        r = req(cli, "POST", "/" + t, entry(base + props))
        atom_error(r, status, code)
    r = req(cli, "POST", "/" + t, entry([("RowKey", "r")]))
    atom_error(r, 400, "PropertiesNeedValue")
    r = req(cli, "POST", "/" + t, entry([("PartitionKey", "a/b"),
                                         ("RowKey", "r")]))
    atom_error(r, 400, "OutOfRangeInput")


HOSTILE = {
    "malformed": b"<entry xmlns='%s'><content>" % ATOM.encode(),
    "not xml": b"{\"PartitionKey\":\"p\",\"RowKey\":\"r\"}",
    "empty": b"",
    "doctype": ('<!DOCTYPE entry><entry xmlns="%s"/>' % ATOM).encode(),
    "billion laughs": (
        '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
        + "".join('<!ENTITY lol%d "%s">' % (i, ("&lol%d;" % (i - 1)
                                                 if i else "&lol;") * 10)
                  for i in range(10))
        + ']>' + entry([("PartitionKey", "p"), ("RowKey", "&lol9;")])
        .split("?>", 1)[1]).encode(),
    "external entity": (
        '<?xml version="1.0"?><!DOCTYPE e [<!ENTITY x SYSTEM '
        '"file:///etc/passwd">]>' + entry([("PartitionKey", "p"),
                                           ("RowKey", "r"), ("s", "&x;")])
        .split("?>", 1)[1]).encode(),
    "undeclared entity": entry([("PartitionKey", "p"), ("RowKey", "r"),
                                "<d:s>&x;</d:s>"]).encode(),
    "wrong root": entry([("PartitionKey", "p"), ("RowKey", "r")])
    .replace('xmlns="%s"' % ATOM, 'xmlns="urn:other"').encode(),
    "wrong property namespace": entry(
        [("PartitionKey", "p"), ("RowKey", "r"), "<m:s>x</m:s>"]).encode(),
    "undeclared prefix": entry(
        [("PartitionKey", "p"), ("RowKey", "r"), "<q:s>x</q:s>"]).encode(),
    "nested property": entry(
        [("PartitionKey", "p"), ("RowKey", "r"),
         "<d:s><d:t>x</d:t></d:s>"]).encode(),
    "deep nesting": entry([("PartitionKey", "p"), ("RowKey", "r"),
                           "<d:s>" + "<d:x>" * 5000 + "</d:x>" * 5000 +
                           "</d:s>"]).encode(),
    "utf-16 garbage": b"\xff\xfe<\x00e\x00",
    # libxml2 2.9.14 checks duplicate attributes quadratically: minutes
    # of CPU for this 1.5 MB tag if it ever reached the parser
    "many attributes": entry(
        [("PartitionKey", "p"), ("RowKey", "r"),
         "<d:s %s>x</d:s>" % " ".join('a%d="1"' % i
                                      for i in range(120000))]).encode(),
    "many elements": entry(
        [("PartitionKey", "p"), ("RowKey", "r")] +
        ["<d:p%d>1</d:p%d>" % (i, i) for i in range(50000)]).encode(),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_xml(cli, case):
    t = "atomhostile"
    r = req(cli, "POST", "/Tables", entry([("TableName", t)]))
    assert r.status in (201, 409), r
    t0 = time.monotonic()
    r = req(cli, "POST", "/" + t, HOSTILE[case])
    assert time.monotonic() - t0 < 5, case
    msg = atom_error(r, 400, "InvalidInput")
    assert "root:" not in msg and "root:" not in r.body.decode("utf-8",
                                                              "replace")
    # nothing was written, and the front end still answers
    r = req(cli, "GET", "/%s()" % t)
    assert r.status == 200 and xml_of(r).findall("a:entry", NS) == [], r


def test_oversized_body(cli):
    t, _ = create_table(cli)
    big = entry([("PartitionKey", "p"), ("RowKey", "r"),
                 ("s", "x" * (5 * 1024 * 1024))])
    r = req(cli, "POST", "/" + t, big)
    atom_error(r, 413, "RequestBodyTooLarge")


def test_errors_before_dispatch_are_atom(cli):
    """Authentication failures and bad query parameters of an Atom request
    are Atom errors too; storage-XML operations keep their own form."""
    r = req(cli, "GET", "/Tables", auth="SharedKey %s:AAAA" % cli.account)
    atom_error(r, 403, "AuthenticationFailed")
    r = req(cli, "GET", "/Tables?$top=abc")
    atom_error(r, 400, "InvalidQueryParameterValue")
    r = req(cli, "GET", "/nosuchtable1()")
    atom_error(r, 404, "TableNotFound")
    r = req(cli, "GET", "/nosuchtable1?comp=acl")
    assert r.status == 404 and r.body.startswith(b"<?xml"), r
    assert b"<Error><Code>" in r.body, r


def test_data_service_version(cli):
    """Atom responses carry the DataServiceVersion the service sent for
    them (old WCF clients refuse a newer one): 1.0, 2.0 with $select."""
    t, r = create_table(cli)
    assert r.header("DataServiceVersion") == "1.0;"
    r = req(cli, "GET", "/%s()?$select=a" % t)
    assert r.header("DataServiceVersion") == "2.0;"
    r = req(cli, "GET", "/%s()" % t, accept=rawhttp.JSON_MINIMAL)
    assert r.header("DataServiceVersion") == "3.0;"


# ------------------------------------------------------------ $batch
def atom_part(verb, url, body=None, etag=None, accept=True):
    lines = ["%s %s HTTP/1.1" % (verb, url),
             "DataServiceVersion: 1.0;NetFx"]
    if accept:
        lines.append("Accept: application/atom+xml,application/xml")
    if etag:
        lines.append("If-Match: %s" % etag)
    if body is not None:
        lines.append("Content-Type: application/atom+xml;type=entry")
        lines.append("Content-Length: %d" % len(body.encode()))
    return "\r\n".join(lines + ["", body or ""])


def atom_batch(parts, b="batch_a1", cs="changeset_c1"):
    out = ["--%s" % b, "Content-Type: multipart/mixed; boundary=%s" % cs, ""]
    for i, p in enumerate(parts, 1):
        out += ["--%s" % cs, "Content-Type: application/http",
                "Content-Transfer-Encoding: binary",
                "Content-ID: %d" % i, "", p]
    out += ["--%s--" % cs, "--%s--" % b, ""]
    return "\r\n".join(out)


def batch_parts(r):
    """[(status, headers, body)] of a 202 multipart response."""
    assert r.status == 202, r
    ct = r.header("Content-Type")
    bnd = ct.split("boundary=")[1]
    text = r.body.decode()
    inner = text.split("--" + bnd)[1]
    m = re.search(r"boundary=(changesetresponse_[0-9a-f-]+)", inner)
    segs = inner.split("--" + m.group(1))[1:-1] if m else [inner]
    out = []
    for seg in segs:
        _, http = seg.split("\r\n\r\n", 1)
        head, _, body = http.partition("\r\n\r\n")
        lines = head.split("\r\n")
        status = int(lines[0].split()[1])
        hdrs = dict(l.split(": ", 1) for l in lines[1:] if ": " in l)
        out.append((status, hdrs, body.rstrip("\r\n")))
    return out


def post_batch(cli, body, version=V):
    return req(cli, "POST", "/$batch", body, version=version,
               content_type="multipart/mixed; boundary=batch_a1")


def test_atom_batch_changeset(cli):
    t, _ = create_table(cli)
    base = "%s/%s" % (cli.root, t)
    r = req(cli, "POST", "/" + t, entry([("PartitionKey", "p"),
                                         ("RowKey", "old"), ("v", "1")]))
    etag = r.header("ETag")
    r = req(cli, "POST", "/" + t, entry([("PartitionKey", "p"),
                                         ("RowKey", "del")]))
    assert r.status == 201, r
    body = atom_batch([
        atom_part("POST", base, entry([("PartitionKey", "p"),
                                       ("RowKey", "a"),
                                       ("n", "5", "Edm.Int64")])),
        atom_part("PUT", "%s(PartitionKey='p',RowKey='old')" % base,
                  entry([("v", "2", "Edm.Int32")]), etag=etag),
        atom_part("MERGE", "%s(PartitionKey='p',RowKey='b')" % base,
                  entry([("w", "true", "Edm.Boolean")])),
        atom_part("DELETE", "%s(PartitionKey='p',RowKey='del')" % base,
                  etag="*"),
    ])
    parts = batch_parts(post_batch(cli, body))
    assert [p[0] for p in parts] == [201, 204, 204, 204]
    assert [p[1]["Content-ID"] for p in parts] == ["1", "2", "3", "4"]
    st, h, b = parts[0]
    assert h["Content-Type"] == \
        "application/atom+xml;type=entry;charset=utf-8"
    e = ET.fromstring(b)
    assert e.get("{%s}etag" % M) == h["ETag"]
    assert props_of(e)["n"][:2] == ("5", "Edm.Int64")
    got = props_of(xml_of(req(cli, "GET",
                              "/%s(PartitionKey='p',RowKey='old')" % t)))
    assert got["v"][:2] == ("2", "Edm.Int32")
    got = props_of(xml_of(req(cli, "GET",
                              "/%s(PartitionKey='p',RowKey='b')" % t)))
    assert got["w"][:2] == ("true", "Edm.Boolean")
    r = req(cli, "GET", "/%s(PartitionKey='p',RowKey='del')" % t)
    atom_error(r, 404, "ResourceNotFound")


def test_atom_batch_atomic_failure(cli):
    t, _ = create_table(cli)
    base = "%s/%s" % (cli.root, t)
    r = req(cli, "POST", "/" + t, entry([("PartitionKey", "p"),
                                         ("RowKey", "x")]))
    assert r.status == 201
    # op 2 inserts an existing row: 409 at index 1, nothing applied
    body = atom_batch([
        atom_part("POST", base, entry([("PartitionKey", "p"),
                                       ("RowKey", "new")])),
        atom_part("POST", base, entry([("PartitionKey", "p"),
                                       ("RowKey", "x")])),
    ])
    parts = batch_parts(post_batch(cli, body))
    assert len(parts) == 1
    st, h, b = parts[0]
    assert st == 409 and h["Content-ID"] == "2"
    assert h["Content-Type"] == "application/xml"
    doc = ET.fromstring(b)
    assert doc.find("m:code", NS).text == "EntityAlreadyExists"
    assert doc.find("m:message", NS).text.startswith("1:")
    r = req(cli, "GET", "/%s(PartitionKey='p',RowKey='new')" % t)
    atom_error(r, 404, "ResourceNotFound")
    # a bad Atom body in op 1: the single failure part, nothing sent
    body = atom_batch([
        atom_part("POST", base, entry([("PartitionKey", "p"),
                                       ("RowKey", "y")])),
        atom_part("POST", base, entry([("PartitionKey", "p"),
                                       ("RowKey", "z"),
                                       ("q", "1", "Edm.Nope")])),
    ])
    parts = batch_parts(post_batch(cli, body))
    assert [(p[0], p[1]["Content-ID"]) for p in parts] == [(400, "2")]
    assert ET.fromstring(parts[0][2]).find("m:code", NS).text == \
        "InvalidInput"
    r = req(cli, "GET", "/%s(PartitionKey='p',RowKey='y')" % t)
    atom_error(r, 404, "ResourceNotFound")
    # hostile XML inside a part
    body = atom_batch([atom_part("POST", base, HOSTILE["billion laughs"]
                                 .decode())])
    parts = batch_parts(post_batch(cli, body))
    assert parts[0][0] == 400


def test_atom_batch_single_get(cli):
    t, _ = create_table(cli)
    req(cli, "POST", "/" + t, entry([("PartitionKey", "p"), ("RowKey", "g"),
                                     ("n", "3", "Edm.Int32")]))
    body = "\r\n".join([
        "--batch_a1", "Content-Type: application/http",
        "Content-Transfer-Encoding: binary", "",
        atom_part("GET", "%s/%s(PartitionKey='p',RowKey='g')" % (cli.root, t)),
        "--batch_a1--", ""])
    parts = batch_parts(post_batch(cli, body))
    st, h, b = parts[0]
    assert st == 200 and h["Content-Type"].startswith(
        "application/atom+xml;type=entry")
    assert props_of(ET.fromstring(b))["n"][:2] == ("3", "Edm.Int32")
