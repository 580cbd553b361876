"""Raw HTTP helpers for the black-box API tests (test_raw_http.py,
test_malformed.py, test_sdk_*.py): our own SharedKey / SharedKeyLite signer
(docs/table-api-spec.md §7), service/account SAS builders (§7.3/§7.4), a
keep-alive client on http.client, and a byte-level client on a plain socket
for requests http.client refuses to send (garbage headers, no Host, bad
request lines).

Standard library only. Nothing here knows the server's internals: every
expectation comes from the spec.
"""

import base64
import datetime
import email.utils
import hashlib
import hmac
import http.client
import json
import re
import socket
import urllib.parse
import uuid

from rtcluster import DEV_ACCOUNT, DEV_KEY

VERSION = "2019-02-02"
JSON_MINIMAL = "application/json;odata=minimalmetadata"
JSON_NONE = "application/json;odata=nometadata"
JSON_FULL = "application/json;odata=fullmetadata"
GUID_RE = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                     r"[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
TS_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,7})?Z$")
ETAG_RE = re.compile(r"^W/\"datetime'(\d{4}-\d\d-\d\dT\d\d%3A\d\d%3A\d\d"
                     r"(\.\d{1,7})?Z)'\"$")


# ------------------------------------------------------------ dates
def http_date(delta_seconds=0):
    """RFC 1123 date, @delta_seconds from now."""
    t = datetime.datetime.now(datetime.timezone.utc) + \
        datetime.timedelta(seconds=delta_seconds)
    return email.utils.format_datetime(t, usegmt=True)


def iso_utc(dt):
    return dt.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# ------------------------------------------------------------ signing
def canonical_resource(account, raw_target):
    """§7.1: "/" + account + raw path + ("?comp=" + value when present)."""
    path, _, query = raw_target.partition("?")
    res = "/" + account + path
    for k, v in urllib.parse.parse_qsl(query, keep_blank_values=True):
        if k == "comp":
            res += "?comp=" + v
            break
    return res


def sign(key, string_to_sign):
    mac = hmac.new(base64.b64decode(key), string_to_sign.encode("utf-8"),
                   hashlib.sha256)
    return base64.b64encode(mac.digest()).decode()


def shared_key(verb, raw_target, content_type="", date="", account=None,
               key=None, content_md5=""):
    """Authorization header value, SharedKey (Table) scheme (§7.2)."""
    account = account or DEV_ACCOUNT
    sts = "\n".join([verb, content_md5, content_type, date,
                     canonical_resource(account, raw_target)])
    return "SharedKey %s:%s" % (account, sign(key or DEV_KEY, sts))


def shared_key_lite(raw_target, date, account=None, key=None):
    """Authorization header value, SharedKeyLite (Table) scheme (§7.2)."""
    account = account or DEV_ACCOUNT
    sts = date + "\n" + canonical_resource(account, raw_target)
    return "SharedKeyLite %s:%s" % (account, sign(key or DEV_KEY, sts))


def table_sas(table, sp="raud", start=None, expiry=None, si="", sip="",
              spr="", spk="", srk="", epk="", erk="", sv=VERSION,
              account=None, key=None):
    """Query string of a service SAS for @table (§7.3), without '?'."""
    account = account or DEV_ACCOUNT
    now = datetime.datetime.now(datetime.timezone.utc)
    st = "" if start is False else iso_utc(start or
                                           now - datetime.timedelta(minutes=5))
    se = "" if expiry is False else iso_utc(expiry or
                                            now + datetime.timedelta(hours=1))
    sts = "\n".join([sp, st, se, "/table/%s/%s" % (account, table.lower()),
                     si, sip, spr, sv, spk, srk, epk, erk])
    params = [("sv", sv), ("tn", table)]
    for k, v in (("sp", sp), ("st", st), ("se", se), ("si", si),
                 ("sip", sip), ("spr", spr), ("spk", spk), ("srk", srk),
                 ("epk", epk), ("erk", erk)):
        if v:
            params.append((k, v))
    params.append(("sig", sign(key or DEV_KEY, sts)))
    return urllib.parse.urlencode(params, quote_via=urllib.parse.quote)


def account_sas(sp="rwdlacu", ss="t", srt="sco", start=None, expiry=None,
                sip="", spr="", sv=VERSION, account=None, key=None, ses=""):
    """Query string of an account SAS (§7.4): the sv >= 2020-12-06 form
    signs one more line (ses, the encryption scope, usually empty)."""
    account = account or DEV_ACCOUNT
    now = datetime.datetime.now(datetime.timezone.utc)
    st = iso_utc(start or now - datetime.timedelta(minutes=5))
    se = iso_utc(expiry or now + datetime.timedelta(hours=1))
    lines = [account, sp, ss, srt, st, se, sip, spr, sv]
    if sv >= "2020-12-06":
        lines.append(ses)
    sts = "\n".join(lines) + "\n"
    params = [("sv", sv), ("ss", ss), ("srt", srt), ("sp", sp), ("st", st),
              ("se", se)]
    if sip:
        params.append(("sip", sip))
    if spr:
        params.append(("spr", spr))
    if ses:
        params.append(("ses", ses))
    params.append(("sig", sign(key or DEV_KEY, sts)))
    return urllib.parse.urlencode(params, quote_via=urllib.parse.quote)


# ------------------------------------------------------------ responses
class Response:
    """A complete response: status, headers (case-insensitive get), body."""

    def __init__(self, status, reason, headers, body):
        self.status = status
        self.reason = reason
        self.header_list = headers          # [(name, value)] as received
        self.body = body

    def header(self, name, default=None):
        name = name.lower()
        for k, v in self.header_list:
            if k.lower() == name:
                return v
        return default

    def headers_named(self, name):
        return [v for k, v in self.header_list if k.lower() == name.lower()]

    def json(self):
        return json.loads(self.body.decode("utf-8"))

    @property
    def error_code(self):
        return self.header("x-ms-error-code")

    def __repr__(self):
        return "<%d %s %r %r>" % (self.status, self.reason, self.header_list,
                                  self.body[:600])


def _from_httpresponse(r):
    body = r.read()
    return Response(r.status, r.reason, r.getheaders(), body)


# ------------------------------------------------------------ clients
class Client:
    """Keep-alive client of one front end. Every request is signed with
    SharedKey unless auth is "lite", "none" or an explicit header value.
    Paths are raw request targets starting with /devstoreaccount1."""

    def __init__(self, port, account=None, key=None, host="127.0.0.1",
                 timeout=30, ssl_context=None):
        self.port = port
        self.ssl_context = ssl_context  # set: HTTPS with this context
        self.host = host
        self.account = account or DEV_ACCOUNT
        self.key = key or DEV_KEY
        self.timeout = timeout
        self.conn = None

    @property
    def root(self):
        return "%s://%s:%d/%s" % ("https" if self.ssl_context else "http",
                                  self.host, self.port, self.account)

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def headers_for(self, verb, target, body=None, headers=None, auth="key",
                    version=VERSION, accept=JSON_MINIMAL, content_type=None,
                    date=None, sign_target=None, sign_account=None):
        h = {}
        date = date if date is not None else http_date()
        if date:
            h["x-ms-date"] = date
        if version:
            h["x-ms-version"] = version
        if accept:
            h["Accept"] = accept
        h["DataServiceVersion"] = "3.0"
        h["MaxDataServiceVersion"] = "3.0;NetFx"
        if body is not None and content_type is None:
            content_type = "application/json"
        if content_type:
            h["Content-Type"] = content_type
        for k, v in (headers or {}).items():
            # an explicit None removes a default header
            for dk in list(h):
                if dk.lower() == k.lower():
                    del h[dk]
            if v is not None:
                h[k] = v
        ct = ""
        for k, v in h.items():
            if k.lower() == "content-type":
                ct = v
        st = sign_target or target
        acct = sign_account or self.account
        if auth == "key":
            h["Authorization"] = shared_key(verb, st, ct, date,
                                            account=acct, key=self.key)
        elif auth == "lite":
            h["Authorization"] = shared_key_lite(st, date, account=acct,
                                                 key=self.key)
        elif auth not in (None, "none"):
            h["Authorization"] = auth
        return h

    def request(self, verb, target, body=None, fresh=False, **kw):
        """Sends one request and returns a Response. @body: bytes, str or
        a dict/list (sent as JSON)."""
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        elif isinstance(body, str):
            body = body.encode()
        h = self.headers_for(verb, target, body=body, **kw)
        for attempt in (0, 1):
            if self.conn is None or fresh:
                self.close()
                if self.ssl_context is not None:
                    self.conn = http.client.HTTPSConnection(
                        self.host, self.port, timeout=self.timeout,
                        context=self.ssl_context)
                else:
                    self.conn = http.client.HTTPConnection(
                        self.host, self.port, timeout=self.timeout)
            try:
                self.conn.request(verb, target, body=body, headers=h)
                r = self.conn.getresponse()
                resp = _from_httpresponse(r)
                if r.will_close:
                    self.close()
                return resp
            except (http.client.RemoteDisconnected, BrokenPipeError,
                    ConnectionResetError):
                # A keep-alive connection the server closed while idle:
                # retry once on a new connection.
                self.close()
                if attempt or fresh:
                    raise
            except BaseException:
                # Never reuse a connection in an unknown state.
                self.close()
                raise
        raise AssertionError("unreachable")

    # convenience wrappers
    def get(self, target, **kw):
        return self.request("GET", target, **kw)

    def post(self, target, body=None, **kw):
        return self.request("POST", target, body=body, **kw)

    def put(self, target, body=None, **kw):
        return self.request("PUT", target, body=body, **kw)

    def delete(self, target, **kw):
        return self.request("DELETE", target, **kw)

    def path(self, rest):
        return "/" + self.account + rest

    def create_table(self, name):
        r = self.post(self.path("/Tables"), {"TableName": name})
        assert r.status == 201, r
        return r

    def insert(self, table, entity, **kw):
        return self.post(self.path("/" + table), entity, **kw)


def seed_entity(port, table, pk, rk, props):
    """Creates @table and puts one entity in it (through a Client on
    @port that is closed after)."""
    c = Client(port)
    try:
        c.create_table(table)
        r = c.put(c.path(entity_path(table, pk, rk)), props)
        assert r.status == 204, r
    finally:
        c.close()


def signed_get(port, table, pk, rk, query="", account=None):
    """The bytes of a point GET of one entity signed with SharedKey (it
    signs the path; @query carries nothing it signs)."""
    account = account or DEV_ACCOUNT
    target = "/%s%s" % (account, entity_path(table, pk, rk))
    date = http_date()
    auth = shared_key("GET", target, "", date, account=account)
    return build_request(
        "GET", target + query,
        [("Host", "127.0.0.1:%d" % port), ("x-ms-date", date),
         ("x-ms-version", "2019-02-02"),
         ("Accept", "application/json;odata=nometadata"),
         ("Authorization", auth)])


def entity_path(table, pk, rk, quote=True):
    """/table(PartitionKey='pk',RowKey='rk') the way Python builds it:
    quotes doubled, then the whole component percent-encoded except the
    template's own quotes/parens."""
    def q(k):
        k = k.replace("'", "''")
        return urllib.parse.quote(k, safe="") if quote else k
    return "/%s(PartitionKey='%s',RowKey='%s')" % (table, q(pk), q(rk))


# ------------------------------------------------------------ raw socket
def read_response(sock, method="GET"):
    """Parses one HTTP response from @sock (http.client does the parsing:
    Content-Length, chunked, or until close). Returns (Response,
    will_close)."""
    r = http.client.HTTPResponse(sock, method=method)
    r.begin()
    resp = _from_httpresponse(r)
    return resp, r.will_close


def raw_exchange(port, data, method="GET", timeout=30, sock=None):
    """Writes the bytes @data (a whole request) to a new connection, or to
    @sock, and reads one response. Returns (Response, will_close, sock);
    the caller closes the socket."""
    if sock is None:
        sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    sock.sendall(data)
    resp, will_close = read_response(sock, method)
    return resp, will_close, sock


def build_request(verb, target, headers, body=b"", version=b"HTTP/1.1"):
    """Request bytes from parts given as str or bytes (no validation, so
    garbage is allowed). @headers: list of (name, value)."""
    def b(x):
        return x if isinstance(x, bytes) else x.encode("utf-8")
    out = [b(verb) + b" " + b(target) + b" " + version + b"\r\n"]
    for k, v in headers:
        out.append(b(k) + b": " + b(v) + b"\r\n")
    out.append(b"\r\n")
    return b"".join(out) + b(body)


def new_request_id():
    return str(uuid.uuid4())
