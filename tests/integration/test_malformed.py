"""Malformed input: a few hundred bad requests, generated deterministically
(seeded), sent signed with SharedKey (so they get past authentication) over
one keep-alive connection and over fresh connections, alternately.

Categories: bad JSON bodies (truncated, wrong types, huge numbers, deep
nesting, invalid UTF-8, bad escapes, duplicate keys, trailing garbage),
bad types and annotations, bad $filter (random token soup that is always
invalid), bad key predicates and paths (random bytes percent-encoded), bad
headers (If-Match / Content-Type / x-ms-version / X-HTTP-Method / $top
garbage, huge headers), bad multipart $batch bodies (truncated, wrong
boundaries, garbage parts), oversized bodies, bad Authorization
headers and SAS tokens, and NUL bytes (%00) inside query parameter values.
Then the whole set again from 8 threads at once, and 60 clients that
disconnect mid-request.

Every request must get a complete 4xx response carrying x-ms-error-code and
an error body (a $batch may instead answer 202 whose failing part carries
the 4xx and the odata.error); none may time out or see its connection
closed without a response. Afterwards nothing was written, the entity the
conditional requests targeted is unchanged, the cluster still serves the
Python SDK, and no daemon has a sanitizer report (spec §8).
"""

import base64
import collections
import http.client
import json
import random
import re
import socket
import urllib.parse

import pytest

import rawhttp

SEED = 20240501
TIMEOUT = 20
TABLE = "malformed"
BATCH_TABLE = "malformedbatch"
JSON_CT = "application/json"
MAX_BODY = 4 * 1024 * 1024


# ------------------------------------------------------------ request model
class Req:
    """One bad request: verb, raw target, extra headers (list of (name,
    value) as str or bytes), body bytes, and whether to sign it."""

    def __init__(self, cat, name, verb, target, headers=(), body=b"",
                 sign=True, content_type=None, no_body_sent=False):
        self.cat = cat
        self.name = name
        self.verb = verb
        self.target = target
        self.headers = list(headers)
        self.body = body if isinstance(body, bytes) else body.encode("utf-8")
        self.sign = sign
        self.content_type = content_type
        self.no_body_sent = no_body_sent    # Content-Length given, no body

    def to_bytes(self, port):
        date = rawhttp.http_date()
        h = [("Host", "127.0.0.1:%d" % port), ("x-ms-date", date),
             ("Accept", "application/json;odata=minimalmetadata"),
             ("DataServiceVersion", "3.0"),
             ("MaxDataServiceVersion", "3.0;NetFx")]
        names = {k.lower() if isinstance(k, str) else k.decode().lower()
                 for k, _ in self.headers}
        if "x-ms-version" not in names:
            h.append(("x-ms-version", "2019-02-02"))
        if self.content_type is not None:
            h.append(("Content-Type", self.content_type))
        h += self.headers
        if "content-length" not in names and "transfer-encoding" not in names:
            h.append(("Content-Length", str(len(self.body))))
        if self.sign:
            ct = self.content_type or ""
            h.append(("Authorization",
                      rawhttp.shared_key(self.verb, self.target, ct, date)))
        body = b"" if self.no_body_sent else self.body
        return rawhttp.build_request(self.verb, self.target, h, body)

    def __repr__(self):
        return "%s/%s: %s %s" % (self.cat, self.name, self.verb,
                                 self.target[:120])


def acct(path):
    return "/" + rawhttp.DEV_ACCOUNT + path


def q(s):
    return urllib.parse.quote(s, safe="")


def insert(cat, name, body, **kw):
    kw.setdefault("content_type", JSON_CT)
    return Req(cat, name, "POST", acct("/" + TABLE), body=body, **kw)


# ------------------------------------------------------------ generators
def gen_json(rng):
    """Bad JSON bodies for Insert Entity."""
    out = []
    n = [0]

    def rk():
        n[0] += 1
        return "json%03d" % n[0]

    def add(name, body):
        out.append(insert("json", name, body))

    for i in range(15):
        valid = json.dumps({"PartitionKey": "m", "RowKey": rk(), "a": 1,
                            "s": "text", "d@odata.type": "Edm.Double",
                            "d": 1.5})
        cut = rng.randrange(1, len(valid) - 1)
        add("truncated@%d" % cut, valid[:cut])
    for body in ("", " ", "[]", "[1,2]", '"str"', "42", "true", "null",
                 "{", "}", "{}}", "[{}]", '{"PartitionKey"}',
                 '{"PartitionKey":}', "{,}", '{"a":1,}'):
        add("shape %r" % body[:20], body)
    for key in ("PartitionKey", "RowKey"):
        for v in (1, 1.5, True, None, [], {}, ["m"], {"v": "m"}):
            ent = {"PartitionKey": "m", "RowKey": rk()}
            ent[key] = v
            add("%s=%r" % (key, v), json.dumps(ent))
    for num in ("1e999", "-1e999", "1E+400", "-1e400"):
        add("huge %s" % num, '{"PartitionKey":"m","RowKey":"%s","a":%s}'
            % (rk(), num))
    for depth in (64, 1000, 100000):
        add("deep array %d" % depth,
            '{"PartitionKey":"m","RowKey":"%s","a":%s1%s}'
            % (rk(), "[" * depth, "]" * depth))
        add("deep object %d" % depth,
            '{"PartitionKey":"m","RowKey":"%s","a":%s1%s}'
            % (rk(), '{"a":' * depth, "}" * depth))
    add("deep top", "[" * 200000)
    for bad in (b"\xff", b"\xc3\x28", b"\xc0\xaf", b"\xed\xa0\x80",
                b"\xf4\x90\x80\x80", b"\xe2\x82", b"\x80abc"):
        for where in ("value", "key", "name"):
            r_ = rk().encode()
            if where == "value":
                body = b'{"PartitionKey":"m","RowKey":"' + r_ + \
                    b'","a":"x' + bad + b'y"}'
            elif where == "key":
                body = b'{"PartitionKey":"m' + bad + b'","RowKey":"' + r_ + \
                    b'"}'
            else:
                body = b'{"PartitionKey":"m","RowKey":"' + r_ + b'","n' + \
                    bad + b'":1}'
            add("utf8 %s %r" % (where, bad), body)
    for esc in ("\\uZZZZ", "\\ud800", "\\udc00x", "\\x41", "\\", "\\u12",
                "\u0001raw", "tab\there"):
        add("escape %r" % esc, '{"PartitionKey":"m","RowKey":"%s","a":"%s"}'
            % (rk(), esc))
    for dup in ('"a":1,"a":2', '"PartitionKey":"n"',
                '"a@odata.type":"Edm.Int64","a":"1","a@odata.type":'
                '"Edm.Int64"'):
        add("duplicate %s" % dup[:20],
            '{"PartitionKey":"m","RowKey":"%s",%s}' % (rk(), dup))
    for tail in ("x", "{}", "\x00", "]", ",{}"):
        add("trailing %r" % tail,
            json.dumps({"PartitionKey": "m", "RowKey": rk()}) + tail)
    for body in ("{'PartitionKey':'m','RowKey':'%s'}" % rk(),
                 '{PartitionKey:"m",RowKey:"%s"}' % rk(),
                 '{"PartitionKey":"m","RowKey":"%s","a":NaN}' % rk(),
                 '{"PartitionKey":"m","RowKey":"%s","a":Infinity}' % rk(),
                 '/*c*/{"PartitionKey":"m","RowKey":"%s"}' % rk(),
                 '{"PartitionKey":"m",\x00"RowKey":"%s"}' % rk()):
        add("non-json %r" % body[:16], body)
    for i in range(8):
        junk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
        add("random bytes %d" % i, junk)
    return out


EDM_BAD = {
    "Edm.Int32": ["abc", 2147483648, -2147483649, 1.5, True, [], {}, "",
                  "1e3"],
    "Edm.Int64": ["abc", "9223372036854775808", "-9223372036854775809",
                  "1.5", "", "1e3", True, [], 12.5],
    "Edm.Double": ["abc", "", True, [], {}, "1.2.3", "--1"],
    "Edm.Boolean": ["maybe", "", [], {}, 2.5, "yes"],
    "Edm.DateTime": ["", "yesterday", "2024-13-01T00:00:00Z",
                     "2024-01-32T00:00:00Z", "1600-01-01T00:00:00Z",
                     "10000-01-01T00:00:00Z", "2024-01-01T25:00:00Z",
                     "2024-01-01T00:00:00.12345678Z", 12345, True],
    "Edm.Guid": ["", "xyz", "c9da6455-213d-42c9-9a79-3e9149a5783",
                 "g9da6455-213d-42c9-9a79-3e9149a57833", 5, True,
                 "c9da6455-213d-42c9-9a79-3e9149a57833-00"],
    "Edm.Binary": ["!!!", "A===", 5, True, [], "QUJD$"],
    "Edm.String": [5, True, [], {}],
}


def gen_types(rng):
    out = []
    n = [0]

    def add(name, props):
        n[0] += 1
        ent = {"PartitionKey": "m", "RowKey": "type%03d" % n[0]}
        ent.update(props)
        out.append(insert("types", name, json.dumps(ent)))

    for edm, values in EDM_BAD.items():
        for v in values:
            add("%s=%r" % (edm, v), {"a@odata.type": edm, "a": v})
    for ann in ("Edm.Int16", "Edm.Foo", "", "Int32", "Edm.Single",
                "Edm.Decimal", 5, True, [], {}):
        add("annotation %r" % (ann,), {"a@odata.type": ann, "a": "1"})
    for v in ({"x": 1}, [1, 2], [], {}):
        add("value %r" % (v,), {"a": v})
    add("PK typed Int32", {"PartitionKey@odata.type": "Edm.Int32"})
    add("RK typed Guid", {"RowKey@odata.type": "Edm.Guid"})
    for name in ("", "a-b", "1a", "x" * 256, "a@b", "a b", "$x", "a.b",
                 "\u00e9\u0301" * 200):
        add("name %r" % name[:12], {name: 1})
    add("string too long", {"a": "x" * 32768})
    add("binary too long", {"a@odata.type": "Edm.Binary",
                            "a": base64.b64encode(b"x" * 65537).decode()})
    add("too many props", {"p%d" % i: i for i in range(260)})
    add("entity too large", {"p%d" % i: "y" * 30000 for i in range(40)})
    for i in range(6):
        edm = rng.choice(sorted(EDM_BAD))
        add("random %s" % edm, {"a@odata.type": edm,
                                "a": rng.choice(EDM_BAD[edm])})
    return out


FILTER_VOCAB = ["PartitionKey", "RowKey", "a", "eq", "ne", "gt", "lt", "ge",
                "le", "and", "or", "not", "(", ")", "'x'", "1", "2L", "1.5",
                "true", "datetime'2020-01-01T00:00:00Z'", "guid'x'", "X'0'",
                "null", ",", "$", "@p", "substringof", "add", "''", "'",
                "eq eq", "))", "((", "1e", "-", "+", "#", "%"]
# Endings that make any prefix invalid.
FILTER_TAILS = [" and", " or", " (", " eq", " not", " 'open", " )", " ne ne",
                " le"]


def gen_filters(rng):
    out = []
    for i in range(50):
        toks = [rng.choice(FILTER_VOCAB) for _ in range(rng.randrange(0, 9))]
        flt = " ".join(toks) + rng.choice(FILTER_TAILS)
        out.append(Req("filter", "soup %d %r" % (i, flt[:40]), "GET",
                       acct("/%s()?$filter=%s" % (TABLE, q(flt)))))
    fixed = ["a eq", "eq 1", "(a eq 1", "a eq 1)", "a eq 'x",
             "a eq 99999999999",
             "a eq 1 and", "not", "startswith(a,'x')", "a eq datetime'bad'",
             "a eq guid'bad'", "a eq X'ABC'", "a eq b", "1 eq 1",
             " or ".join("a eq %d" % i for i in range(16)), "a eq null",
             "a add 1 eq 2", "a eq 1.5.5", "(" * 500 + "a eq 1" + ")" * 499,
             "a eq '" + "x" * 70000 + "'", "\x00", "a eq 1; drop"]
    for i, flt in enumerate(fixed):
        out.append(Req("filter", "fixed %d %r" % (i, flt[:30]), "GET",
                       acct("/%s()?$filter=%s" % (TABLE, q(flt)))))
    for i in range(6):
        raw = "".join("%%%02X" % rng.randrange(256)
                      for _ in range(rng.randrange(1, 30)))
        out.append(Req("filter", "bytes %d" % i, "GET",
                       acct("/%s()?$filter=%s%%20and" % (TABLE, raw))))
    for v in ("%ZZ", "%", "%4", "a%20eq%20%27%FF%27"):
        out.append(Req("filter", "encoding %s" % v, "GET",
                       acct("/%s()?$filter=%s" % (TABLE, v))))
    # Query Tables filters too.
    for flt in ("TableName eq", "TableName eq 'x' and", "TableName 'x'",
                "eq 'x'", "(TableName eq 'x'"):
        out.append(Req("filter", "tables %r" % flt, "GET",
                       acct("/Tables?$filter=" + q(flt))))
    return out


def rand_pct(rng, lo=1, hi=24):
    return "".join("%%%02X" % rng.randrange(256)
                   for _ in range(rng.randrange(lo, hi)))


def gen_paths(rng):
    out = []
    for i in range(25):
        pk, rk = rand_pct(rng), rand_pct(rng)
        verb = "GET" if i % 2 == 0 else "DELETE"
        out.append(Req("path", "random key bytes %d" % i, verb,
                       acct("/%s(PartitionKey='%s',RowKey='%s')"
                            % (TABLE, pk, rk)),
                       headers=[("If-Match", "*")] if verb == "DELETE"
                       else []))
    for i in range(10):
        out.append(Req("path", "random table bytes %d" % i, "GET",
                       acct("/%s()" % rand_pct(rng, 1, 70))))
    structural = [
        "(PartitionKey='a'", "(PartitionKey=a,RowKey=b)", "(Foo='a',Bar='b')",
        "(PartitionKey='a',RowKey='b')junk", "('a','b')",
        "(PartitionKey='a''',RowKey=)", "(PartitionKey='a',RowKey='b'",
        "(PartitionKey='a',,RowKey='b')", "(PartitionKey=='a',RowKey='b')",
        "(PartitionKey='a',RowKey='b',RowKey='c')",
        "(PartitionKey='a',PartitionKey='b')",
        "(PartitionKey='%ZZ',RowKey='b')",
        "(PartitionKey='a%2Fb',RowKey='b')",
        "(PartitionKey='a%00',RowKey='b')",
        "(PartitionKey='a#',RowKey='b')", "(PartitionKey='" + "k" * 1100 +
        "',RowKey='b')", "(PartitionKey='a',RowKey='b')/extra", "/x/y/z",
        "()()", "(", ")", "((PartitionKey='a',RowKey='b'))",
        "(PartitionKey='a' RowKey='b')", "(PartitionKey=\"a\",RowKey=\"b\")",
    ]
    for i, s in enumerate(structural):
        out.append(Req("path", "structure %d %r" % (i, s[:30]), "GET",
                       acct("/" + TABLE + s)))
    for p in ("/Tables('')", "/Tables('a')", "/Tables('" + "a" * 100 + "')",
              "/Tables(", "/Tables('x'", "/Tables(x)", "/Tables('%FF%FE')",
              "/Tables/x", "/$batch/x", "//", "/%ZZ", "/Tables('ab-c')"):
        out.append(Req("path", "tables %r" % p[:20], "GET", acct(p)))
    return out


def gen_headers(rng, target_path):
    out = []
    printable = "".join(chr(c) for c in range(33, 127))
    ifm = ['W/"', 'W/""x', '"x"', "**", "W/\"datetime'garbage'\"", "W/",
           "W/\"datetime'2020-01-01T00%3A00%3A00.0000000Z'\"junk", "*, *",
           "garbage", 'W/"a", W/"b"']
    for i in range(12):
        ifm.append("".join(rng.choice(printable)
                           for _ in range(rng.randrange(1, 80))))
    for i in range(4):
        ifm.append(bytes(rng.randrange(128, 256)
                         for _ in range(rng.randrange(1, 20))))
    ifm.append(b"W/\"\x01\x02\"")
    for i, v in enumerate(ifm):
        out.append(Req("headers", "If-Match %d %r" % (i, v[:20]), "PUT",
                       acct(target_path), headers=[("If-Match", v)],
                       body=b'{"v":99}', content_type=JSON_CT))
    cts = ["text/plain", "application/xml", "image/png", "garbage/garbage",
           "application/x-www-form-urlencoded", "application/atom+xml",
           "multipart/mixed; boundary=x", "garbage", ";;;", "/"]
    for i in range(4):
        cts.append("".join(rng.choice(printable)
                           for _ in range(rng.randrange(1, 40)))
                   .replace("json", "jso"))
    for i, ct in enumerate(cts):
        # The front end reads unknown media types as JSON (lenient, see
        # frontend/DESIGN-api.md), so the body is not JSON either: whatever
        # way it is read, the answer must be a 4xx and nothing written.
        body = "PartitionKey=m&RowKey=ct%02d" % i
        out.append(insert("headers", "Content-Type %r" % ct[:20], body,
                          content_type=ct))
    for v in ("garbage", "2019-02", "2019/02/02", "2008-01-01", "", "0",
              "2019-02-02x", "9999-99-99", "2019-02-30 ", "1.0"):
        out.append(Req("headers", "x-ms-version %r" % v, "GET",
                       acct("/Tables"), headers=[("x-ms-version", v)]))
    for v in ("FOO", "GET", "POST", "merge ", "", "MERGE,PUT"):
        out.append(Req("headers", "X-HTTP-Method %r" % v, "POST",
                       acct(target_path), headers=[("X-HTTP-Method", v),
                                                   ("If-Match", "*")],
                       body=b'{"v":98}', content_type=JSON_CT))
    for v in ("-0", "-1", "abc", "1.5", "%00", "1,2", "0x10"):
        out.append(Req("headers", "$top %r" % v, "GET",
                       acct("/%s()?$top=%s" % (TABLE, v))))
    for v in ("yaml", "application/xml", "text/html", "atom", "%FF"):
        out.append(Req("headers", "$format %r" % v, "GET",
                       acct("/%s()?$format=%s" % (TABLE, q(v)))))
    # huge headers (GETs of a missing entity, so the base answer is 404)
    miss = acct("/%s(PartitionKey='none',RowKey='none')" % TABLE)
    for n in (8 * 1024, 32 * 1024, 100 * 1024):
        out.append(Req("headers", "huge header %d" % n, "GET", miss,
                       headers=[("X-Junk", "j" * n)]))
    out.append(Req("headers", "many headers", "GET", miss,
                   headers=[("X-Junk-%d" % i, "v" * 100)
                            for i in range(300)]))
    out.append(Req("headers", "huge client id", "GET", miss,
                   headers=[("x-ms-client-request-id", "c" * 50000)]))
    return out


def batch_body(table, parts, boundary="batch_B", cs="changeset_C"):
    lines = ["--" + boundary, "Content-Type: multipart/mixed; boundary=" + cs,
             ""]
    for verb, url, body in parts:
        lines += ["--" + cs, "Content-Type: application/http",
                  "Content-Transfer-Encoding: binary", "", "%s %s HTTP/1.1"
                  % (verb, url), "Accept: application/json",
                  "Content-Type: application/json", "", body]
    lines += ["--" + cs + "--", "--" + boundary + "--", ""]
    return "\r\n".join(lines).encode()


def gen_batches(rng, port):
    out = []
    root = "http://127.0.0.1:%d/%s" % (port, rawhttp.DEV_ACCOUNT)
    url = "%s/%s" % (root, BATCH_TABLE)
    mp = "multipart/mixed; boundary=batch_B"

    def add(name, body, ct=mp):
        out.append(Req("batch", name, "POST", acct("/$batch"), body=body,
                       content_type=ct))

    def ent(i):
        return json.dumps({"PartitionKey": "b", "RowKey": "r%d" % i})

    good = batch_body(BATCH_TABLE, [("POST", url, ent(i)) for i in range(3)])
    for i in range(15):
        cut = rng.randrange(10, len(good) - 20)
        add("truncated@%d" % cut, good[:cut])
    add("no boundary", good, "multipart/mixed")
    add("empty boundary", good, "multipart/mixed; boundary=")
    add("wrong boundary", good, "multipart/mixed; boundary=batch_X")
    add("json content type", good, JSON_CT)
    add("no content type", good, None)
    for i in range(8):
        junk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400)))
        add("random body %d" % i, junk)
    add("empty body", b"")
    add("only boundary", b"--batch_B--\r\n")
    bad_parts = [
        ("garbage line", [("GARBAGE", "", "")]),
        ("bad verb", [("FETCH", url, ent(1))]),
        ("no url", [("POST", "", ent(1))]),
        ("bad json", [("POST", url, '{"PartitionKey":"b","RowKey":')]),
        ("bad json 2", [("POST", url, "[[[")]),
        ("other table", [("POST", url, ent(1)),
                         ("POST", root + "/nosuchothertable", ent(2))]),
        ("bad predicate", [("PUT", url + "(PartitionKey='b'", ent(1))]),
        ("mixed partitions", [("POST", url, ent(1)),
                              ("POST", url, json.dumps(
                                  {"PartitionKey": "c", "RowKey": "x"}))]),
        ("duplicate row", [("POST", url, ent(1)), ("POST", url, ent(1))]),
        ("get with writes", [("POST", url, ent(1)),
                             ("GET", url + "(PartitionKey='b',RowKey='r1')",
                              "")]),
        ("bad key chars", [("POST", url, json.dumps(
            {"PartitionKey": "b", "RowKey": "a/b"}))]),
        ("too many", [("POST", url, ent(i)) for i in range(101)]),
        ("bad type", [("POST", url, json.dumps(
            {"PartitionKey": "b", "RowKey": "t",
             "a@odata.type": "Edm.Int64", "a": "x"}))]),
        ("missing table", [("POST", root + "/nosuchbatchtable", ent(1))]),
        ("delete missing", [("DELETE", url + "(PartitionKey='b',RowKey='zz')",
                             "")]),
    ]
    for name, parts in bad_parts:
        add(name, batch_body(BATCH_TABLE, parts))
    nocs = good.replace(b"Content-Type: application/http", b"Content-Type: "
                        b"text/plain")
    add("part not application/http", nocs)
    add("no changeset end", good.replace(b"--changeset_C--\r\n", b""))
    add("no batch end", good.replace(b"--batch_B--\r\n", b""))
    add("nested changeset", good.replace(
        b"Content-Type: application/http",
        b"Content-Type: multipart/mixed; boundary=changeset_C", 1))
    add("http/9.9", good.replace(b"HTTP/1.1", b"HTTP/9.9"))
    return out


def gen_oversized(port):
    big = b'{"PartitionKey":"m","RowKey":"big","s":"' + \
        b"x" * (MAX_BODY + 1) + b'"}'
    out = [insert("oversized", "4MiB+ insert", big),
           Req("oversized", "4MiB+ batch", "POST", acct("/$batch"),
               body=b"--batch_B\r\n" + b"x" * (MAX_BODY + 1),
               content_type="multipart/mixed; boundary=batch_B"),
           insert("oversized", "1 GiB declared, Expect", b"",
                  headers=[("Content-Length", str(1 << 30)),
                           ("Expect", "100-continue")], no_body_sent=True),
           insert("oversized", "1 GiB declared, no body sent", b"",
                  headers=[("Content-Length", str(1 << 30))],
                  no_body_sent=True),
           insert("oversized", "8 MiB declared, Expect", b"",
                  headers=[("Content-Length", str(8 << 20)),
                           ("Expect", "100-continue")], no_body_sent=True)]
    return out


def gen_auth(rng, tbl_path):
    out = []
    printable = "".join(chr(c) for c in range(32, 127))

    def add(name, auth, target="/Tables", headers=()):
        h = list(headers)
        if auth is not None:
            h.append(("Authorization", auth))
        out.append(Req("auth", name, "GET", acct(target), headers=h,
                       sign=False))

    for i in range(12):
        add("garbage %d" % i, "".join(rng.choice(printable)
                                      for _ in range(rng.randrange(0, 90))))
    for i in range(5):
        sig = base64.b64encode(bytes(rng.randrange(256)
                                     for _ in range(32))).decode()
        add("wrong sig %d" % i, "SharedKey %s:%s" % (rawhttp.DEV_ACCOUNT,
                                                     sig))
    for v in ("Basic dXNlcjpwYXNz", "Bearer abc.def.ghi", "SharedKey",
              "SharedKey :", "SharedKey devstoreaccount1:",
              "SharedKeyLite devstoreaccount1:!!!", "sharedkey x:y",
              "SharedKey otheraccount:" + "A" * 44,
              "SharedKey devstoreaccount1:" + "A" * 5000, None,
              "SharedKey devstoreaccount1:\x7f\x7f"):
        add("form %r" % (v or "")[:24], v)
    for v in (b"SharedKey \xff\xfe:abc", b"\x00\x01\x02"):
        add("bytes %r" % v[:8], v)
    sas_good = rawhttp.table_sas(TABLE, sp="r")
    params = dict(urllib.parse.parse_qsl(sas_good))
    mutations = {"sig": ["garbage", "", "%%%", "A" * 4000],
                 "se": ["garbage", "", "2020-13-45T00:00:00Z"],
                 "st": ["yesterday"], "sv": ["garbage", "1999-01-01"],
                 "sp": ["zzz", ""], "tn": ["othertable", ""],
                 "spk": ["\x00"], "sip": ["not-an-ip", "1.2.3.4-"],
                 "spr": ["ftp"]}
    for k, vals in mutations.items():
        for v in vals:
            p = dict(params)
            p[k] = v
            target = "%s()?%s" % (tbl_path, urllib.parse.urlencode(p))
            add("sas %s=%r" % (k, v[:10]), None, target=target)
    add("sas without sig", None, target="%s()?sv=2019-02-02&tn=%s&sp=r"
        % (tbl_path, TABLE))
    add("account sas garbage", None,
        target="%s()?sv=2019-02-02&ss=t&srt=zzz&sp=r&se=x&sig=y" % tbl_path)
    for delta in (-3600, 3600, -86400 * 365):
        d = rawhttp.http_date(delta)
        add("date %+d" % delta, rawhttp.shared_key("GET", acct("/Tables"), "",
                                                   d),
            headers=[("x-ms-date", d)])
    return out


def gen_nul(rng):
    """A percent-encoded NUL inside query parameter values: the decoded
    value must not be silently cut at the NUL (a C-string truncation
    would turn '1%00x' into '1' and '%00' into an absent parameter)."""
    out = []
    for name, qs in (
            ("filter only NUL", "$filter=%00"),
            ("filter NUL tail", "$filter=a%20eq%201%00garbage"),
            ("select NUL", "$select=a%00junk"),
            ("top NUL", "$top=1%00x"),
            ("timeout NUL", "timeout=5%00x"),
            ("format NUL", "$format=application%2Fjson%00x"),
            ("next keys NUL", "NextPartitionKey=%00x&NextRowKey=%00y")):
        out.append(Req("nul", name, "GET", acct("/%s()?%s" % (TABLE, qs))))
    sas = rawhttp.table_sas(TABLE, sp="r")
    for name, qs in (("sas tn NUL", sas.replace("tn=%s" % TABLE,
                                                  "tn=%s%%00x" % TABLE)),
                     ("sas extra spk NUL", sas + "&spk=%00"),
                     ("sas extra epk NUL", sas + "&epk=%00"),
                     ("sas sp NUL", sas.replace("sp=r", "sp=r%00d"))):
        out.append(Req("nul", name, "GET", acct("/%s()?%s" % (TABLE, qs)),
                       sign=False))
    return out


# ------------------------------------------------------------ sending
class Sender:
    """Sends Req objects over a keep-alive socket or fresh ones and checks
    each answer; collects failures instead of stopping at the first."""

    def __init__(self, port):
        self.port = port
        self.sock = None
        self.failures = []
        self.failed = set()
        self.stats = collections.Counter()
        self.sent = 0

    def _connect(self):
        s = socket.create_connection(("127.0.0.1", self.port),
                                     timeout=TIMEOUT)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s

    def close(self):
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def send(self, req, fresh):
        self.sent += 1
        data = req.to_bytes(self.port)
        if fresh or self.sock is None:
            if fresh:
                sock = self._connect()
            else:
                self.sock = sock = self._connect()
        else:
            sock = self.sock
        how = "fresh" if fresh else "keep-alive"
        resp = None
        try:
            try:
                sock.sendall(data)
            except (BrokenPipeError, ConnectionResetError):
                # The server may answer early and close (413 before a
                # body it will not read); the answer must still be there.
                self.stats["early close while sending"] += 1
            try:
                resp, will_close = rawhttp.read_response(sock, req.verb)
            except socket.timeout:
                self.fail(req, how, "timed out after %ss without a response"
                          % TIMEOUT)
                will_close = True
            except (http.client.RemoteDisconnected, ConnectionResetError,
                    http.client.IncompleteRead, http.client.BadStatusLine,
                    http.client.LineTooLong, OSError) as e:
                self.fail(req, how, "connection closed/reset without a "
                          "complete response: %r" % e)
                will_close = True
        finally:
            if fresh:
                sock.close()
        if not fresh and (resp is None or will_close or req.no_body_sent):
            self.close()
        if resp is not None:
            self.check(req, how, resp)

    def fail(self, req, how, why):
        self.failures.append("%r [%s]: %s" % (req, how, why))
        self.failed.add(repr(req))

    @staticmethod
    def brief(r):
        return "%d %s %r" % (r.status, r.error_code, r.body[:160])

    def check(self, req, how, r):
        self.stats["%d %s" % (r.status, r.error_code)] += 1
        if r.status == 202 and req.target.startswith(acct("/$batch")):
            why = check_batch_failure(r)
            if why:
                self.fail(req, how, why)
            return
        if not 400 <= r.status < 500:
            self.fail(req, how, "want 4xx, got %s" % self.brief(r))
            return
        if not r.error_code:
            self.fail(req, how, "no x-ms-error-code: %s" % self.brief(r))
            return
        if not r.body:
            self.fail(req, how, "empty error body: %s" % self.brief(r))
            return
        ct = r.header("Content-Type") or ""
        if ct.startswith("application/json"):
            try:
                code = r.json()["odata.error"]["code"]
            except (ValueError, KeyError, TypeError):
                self.fail(req, how, "error body is not odata.error JSON: "
                          "%s" % self.brief(r))
                return
        else:
            code = None
            if b"<Code>" in r.body:
                code = r.body.split(b"<Code>")[1].split(b"</Code>")[0] \
                    .decode()
        if code != r.error_code:
            self.fail(req, how, "body code %r != header %r: %s"
                      % (code, r.error_code, self.brief(r)))

    def run(self, reqs):
        for i, req in enumerate(reqs):
            self.send(req, fresh=(i % 2 == 1))
        self.close()


def check_batch_failure(r):
    """A 202 to a bad batch must contain a failing (4xx) part with an
    odata.error code."""
    text = r.body.decode("utf-8", "replace")
    statuses = [int(s) for s in
                re.findall(r"HTTP/1\.1 (\d{3})", text)]
    bad = [s for s in statuses if 400 <= s < 500]
    if not bad:
        return "202 without a failing part: %r" % r.body[:300]
    if '"odata.error"' not in text or '"code"' not in text:
        return "failing part without an odata.error body: %r" % r.body[:300]
    return None


# ------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def env(cluster):
    """Tables for the sweep, an entity the conditional requests target,
    and the generated requests of every category."""
    c = rawhttp.Client(cluster.fe_port)
    for t in (TABLE, BATCH_TABLE):
        assert c.post(c.path("/Tables"), {"TableName": t}).status == 201
    target = rawhttp.entity_path(TABLE, "target", "t")
    r = c.put(c.path(target), {"v": 0})
    assert r.status == 204, r
    etag = r.header("ETag")
    c.close()
    rng = random.Random(SEED)
    cats = collections.OrderedDict()
    cats["json"] = gen_json(rng)
    cats["types"] = gen_types(rng)
    cats["filter"] = gen_filters(rng)
    cats["path"] = gen_paths(rng)
    cats["headers"] = gen_headers(rng, target)
    cats["batch"] = gen_batches(rng, cluster.fe_port)
    cats["oversized"] = gen_oversized(cluster.fe_port)
    cats["auth"] = gen_auth(rng, "/" + TABLE)
    cats["nul"] = gen_nul(rng)
    return {"cats": cats, "target": target, "etag": etag}


CATEGORIES = ["json", "types", "filter", "path", "headers", "batch",
              "oversized", "auth", "nul"]


# ------------------------------------------------------------ tests
def test_enough_requests(env):
    """A few hundred distinct bad requests are generated."""
    n = sum(len(v) for v in env["cats"].values())
    print({k: len(v) for k, v in env["cats"].items()}, "total", n)
    assert n >= 300, n


@pytest.mark.parametrize("cat", CATEGORIES)
def test_category(cluster, env, cat):
    """Every bad request of the category: a complete 4xx answer with
    x-ms-error-code and an error body, keep-alive and fresh connections
    alike."""
    s = Sender(cluster.fe_port)
    s.run(env["cats"][cat])
    env.setdefault("seq_failed", set()).update(s.failed)
    env.setdefault("seq_ran", set()).add(cat)
    print("%s: %d requests; answers: %s" % (cat, s.sent, dict(s.stats)))
    assert not s.failures, "%d of %d failed:\n  %s" % (
        len(s.failures), s.sent, "\n  ".join(f[:400] for f in
                                             s.failures[:60]))


def test_concurrent_sweep(cluster, env):
    """Every generated request again, from 8 threads at once (each with
    its own keep-alive connection): same checks, so races in the error
    paths show up too (and, under ASan, in the daemons' stderr)."""
    import concurrent.futures
    reqs = [r for cat in CATEGORIES for r in env["cats"][cat]
            if cat != "oversized"]
    # The same bad requests as before, minus the ones the sequential
    # sweep already reports as failing (known, listed there).
    chunks = [reqs[i::8] for i in range(8)]

    def run(chunk):
        s = Sender(cluster.fe_port)
        s.run(chunk)
        return s

    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        senders = list(ex.map(run, chunks))
    failures = [f for s in senders for f in s.failures]
    timeouts = [f for f in failures if "timed out" in f or "closed" in f]
    assert not timeouts, "\n".join(f[:400] for f in timeouts[:40])
    assert sum(s.sent for s in senders) == len(reqs)
    # Under concurrency, nothing may fail that did not fail alone.
    if env.get("seq_ran", set()) >= set(CATEGORIES):
        new = set().union(*(s.failed for s in senders)) - env["seq_failed"]
        assert not new, "\n".join(
            f[:400] for f in failures if any(f.startswith(n) for n in new))


def test_abrupt_disconnects(cluster):
    """Clients that vanish mid-request (partial request line, partial
    headers, half a body, a declared body never sent) do not hurt the
    front end: afterwards it answers normally."""
    target = acct("/" + TABLE)
    date = rawhttp.http_date()
    body = b'{"PartitionKey":"gone","RowKey":"x","s":"' + b"y" * 5000 + b'"}'
    full = rawhttp.build_request(
        "POST", target,
        [("Host", "127.0.0.1"), ("x-ms-date", date),
         ("x-ms-version", "2019-02-02"), ("Content-Type", JSON_CT),
         ("Content-Length", str(len(body))),
         ("Authorization", rawhttp.shared_key("POST", target, JSON_CT,
                                              date))], body)
    head_end = full.index(b"\r\n\r\n") + 4
    cuts = [5, 30, head_end - 10, head_end, head_end + 100,
            len(full) - 1]
    socks = []
    for i in range(60):
        s = socket.create_connection(("127.0.0.1", cluster.fe_port),
                                     timeout=TIMEOUT)
        s.sendall(full[:cuts[i % len(cuts)]])
        socks.append(s)
    for i, s in enumerate(socks):
        if i % 2:
            # RST instead of FIN
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                         b"\x01\x00\x00\x00\x00\x00\x00\x00")
        s.close()
    c = rawhttp.Client(cluster.fe_port)
    assert c.get(c.path("/Tables")).status == 200
    r = c.get(c.path(rawhttp.entity_path(TABLE, "gone", "x")))
    assert r.status == 404, r
    c.close()


def test_nothing_written(cluster, env):
    """No bad request wrote anything: the tables hold only the target
    entity, which still has v == 0 and its original ETag."""
    svc = cluster.table_service_client()
    ents = list(svc.get_table_client(TABLE).list_entities())
    assert [(e["PartitionKey"], e["RowKey"]) for e in ents] == \
        [("target", "t")], [(e["PartitionKey"], e["RowKey"]) for e in ents]
    assert ents[0]["v"] == 0 and ents[0].metadata["etag"] == env["etag"]
    assert list(svc.get_table_client(BATCH_TABLE).list_entities()) == []


def test_cluster_still_serves(cluster):
    """After the sweep the Python SDK works normally, on many keep-alive
    requests."""
    svc = cluster.table_service_client()
    t = svc.create_table("aftermalformed")
    for i in range(50):
        t.create_entity({"PartitionKey": "p", "RowKey": "%02d" % i, "i": i})
    assert [e["i"] for e in t.list_entities()] == list(range(50))
    t.update_entity({"PartitionKey": "p", "RowKey": "07", "i": 70})
    assert t.get_entity("p", "07")["i"] == 70
    svc.delete_table("aftermalformed")


def test_no_sanitizer_reports(cluster):
    """No daemon logged an ASan/UBSan/LSan report during the sweep."""
    cluster.check_sanitizers()
