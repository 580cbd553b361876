#!/usr/bin/env python3
"""mem_client.py: the client side of bench/bench-memory (never run by ctest).

Talks the Azure Table REST API to a rangetable front end with the
development account, signed with SharedKeyLite (hmac/hashlib of the
standard library; HTTP is http.client's). Three commands:

  setup ENDPOINT TABLE            create TABLE (409 is fine) and upsert the
                                  entity (PartitionKey 'p', RowKey 'r')
  conns ENDPOINT TABLE N          open N keep-alive connections, each of
                                  which completes one point GET of that
                                  entity (200 expected), print "ready N OK
                                  FAILED" and keep every connection open,
                                  idle, until stdin closes; then close them
  tables ENDPOINT PREFIX N E T    create tables PREFIX0..PREFIX{N-1} with E
                                  entities each, on T threads (one
                                  keep-alive connection per thread)

ENDPOINT is path-style: http://127.0.0.1:PORT/devstoreaccount1.
Exit status: 0 when every request got its expected answer, 1 otherwise.
"""
import base64
import email.utils
import hashlib
import hmac
import http.client
import json
import sys
import threading
import urllib.parse

DEV_ACCOUNT = "devstoreaccount1"
DEV_KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/"
           "K1SZFPTOtr/KBHBeksoGMGw==")


def parse_endpoint(ep):
    u = urllib.parse.urlsplit(ep)
    account = u.path.strip("/")
    return u.hostname, u.port or 80, account


def headers_for(account, path, body=None):
    """SharedKeyLite (Table service): StringToSign = date + "\\n" +
    "/" + account + path (the raw path, as sent)."""
    date = email.utils.formatdate(usegmt=True)
    sts = date + "\n/" + account + path
    mac = hmac.new(base64.b64decode(DEV_KEY), sts.encode(), hashlib.sha256)
    h = {
        "x-ms-date": date,
        "x-ms-version": "2019-02-02",
        "Accept": "application/json;odata=nometadata",
        "Authorization": "SharedKeyLite %s:%s" % (
            account, base64.b64encode(mac.digest()).decode()),
    }
    if body is not None:
        h["Content-Type"] = "application/json"
        h["Prefer"] = "return-no-content"
    return h


def call(conn, account, method, path, obj=None):
    body = json.dumps(obj).encode() if obj is not None else None
    conn.request(method, path, body=body,
                 headers=headers_for(account, path, body))
    r = conn.getresponse()
    r.read()
    return r.status


def entity_path(account, table, pk, rk):
    return "/%s/%s(PartitionKey='%s',RowKey='%s')" % (account, table, pk, rk)


def cmd_setup(ep, table):
    host, port, account = parse_endpoint(ep)
    c = http.client.HTTPConnection(host, port, timeout=30)
    st = call(c, account, "POST", "/%s/Tables" % account, {"TableName": table})
    if st not in (201, 204, 409):
        print("create table %s: %d" % (table, st), file=sys.stderr)
        return 1
    st = call(c, account, "PUT", entity_path(account, table, "p", "r"),
              {"PartitionKey": "p", "RowKey": "r", "Value": "x" * 200})
    if st != 204:
        print("upsert: %d" % st, file=sys.stderr)
        return 1
    return 0


def cmd_conns(ep, table, n):
    host, port, account = parse_endpoint(ep)
    path = entity_path(account, table, "p", "r")
    conns, ok, failed = [], 0, 0
    for _ in range(n):
        c = http.client.HTTPConnection(host, port, timeout=30)
        try:
            st = call(c, account, "GET", path)
        except OSError as e:
            print("connection %d: %s" % (len(conns), e), file=sys.stderr)
            failed += 1
            continue
        conns.append(c)
        if st == 200:
            ok += 1
        else:
            failed += 1
    print("ready %d %d %d" % (len(conns), ok, failed), flush=True)
    sys.stdin.read()  # hold every connection open until told to stop
    for c in conns:
        c.close()
    return 0 if failed == 0 else 1


def cmd_tables(ep, prefix, n, per, threads):
    host, port, account = parse_endpoint(ep)
    failures = []

    def run(first):
        c = http.client.HTTPConnection(host, port, timeout=60)
        for i in range(first, n, threads):
            t = "%s%d" % (prefix, i)
            st = call(c, account, "POST", "/%s/Tables" % account,
                      {"TableName": t})
            if st not in (201, 204, 409):
                failures.append("create %s: %d" % (t, st))
                continue
            for j in range(per):
                st = call(c, account, "PUT",
                          entity_path(account, t, "p%d" % j, "r"),
                          {"PartitionKey": "p%d" % j, "RowKey": "r",
                           "Value": "x" * 200})
                if st != 204:
                    failures.append("upsert %s/%d: %d" % (t, j, st))

    ths = [threading.Thread(target=run, args=(k,)) for k in range(threads)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    for f in failures[:10]:
        print(f, file=sys.stderr)
    return 0 if not failures else 1


def main(argv):
    if len(argv) >= 3 and argv[0] == "setup":
        return cmd_setup(argv[1], argv[2])
    if len(argv) >= 4 and argv[0] == "conns":
        return cmd_conns(argv[1], argv[2], int(argv[3]))
    if len(argv) >= 6 and argv[0] == "tables":
        return cmd_tables(argv[1], argv[2], int(argv[3]), int(argv[4]),
                          int(argv[5]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
