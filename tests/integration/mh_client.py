"""The client host of test_multihost.py: runs in the client's network
namespace (`ip netns exec NS /usr/bin/python3 mh_client.py CMD ...`) and
talks to the front ends with the official SDK (azure.data.tables) only.

Commands (each prints one JSON document on stdout; exit 0 unless the
command could not do its job at all):

  wait   --fe URL... --timeout S      until every front end lists tables
  status --url URL [--token-file F]   GET URL (no redirects; F: the admin
                                      token, sent as Bearer): JSON body of
                                      a 200, else exit 3
  load   --fe URL1 --fe URL2 --n N    create the table through fe1, write N
                                      entities through each front end (half
                                      one by one, half in batches), read
                                      each front end's writes through the
                                      other
  run    --fe URL... --history FILE --stop FILE
                                      writers and readers on every front
                                      end until FILE --stop exists; each
                                      attempt is one JSON line of FILE
  dump   --fe URL...                  every entity of the table as read
                                      through each front end

Writes carry "v", a number that grows with every attempt of one writer
(never reused, so a value names the attempt that wrote it). The SDK's own
retries are off (retry_total=0): this script retries 503s and timeouts
itself, as an application on the SDK would, and records each attempt's
outcome: "ok", "unknown" (timeout, connection error, 500, 504: it may have
been applied) or "fail" (any other answer: it was not).

Account and key come from --account/--key (the accounts file the test
gives the front ends).
"""

import argparse
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request

for _v in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY",
           "all_proxy", "ALL_PROXY"):
    os.environ.pop(_v, None)

if sys.argv[1:2] != ["status"]:
    # The SDK takes ~0.5 s of CPU to import: `status`, which the test
    # polls on the masters' hosts, does without it.
    from azure.core.credentials import AzureNamedKeyCredential
    from azure.core.exceptions import (HttpResponseError,
                                       ResourceExistsError,
                                       ServiceRequestError,
                                       ServiceResponseError)
    from azure.data.tables import TableServiceClient, UpdateMode

TABLE = "multihost"
BATCH_ROWS = 5


def service(args, url):
    return TableServiceClient(
        endpoint=url, credential=AzureNamedKeyCredential(args.account,
                                                         args.key),
        retry_total=0, connection_timeout=args.connect_timeout,
        read_timeout=args.read_timeout)


def classify(exc):
    """(outcome, detail) of an exception from an SDK call."""
    if isinstance(exc, (ServiceRequestError, ServiceResponseError)):
        return "unknown", type(exc).__name__
    if isinstance(exc, HttpResponseError):
        code = exc.status_code or 0
        ecode = getattr(exc, "error_code", None) or ""
        if code in (500, 504) or code == 0:
            return "unknown", "%d %s" % (code, ecode)
        return "fail", "%d %s" % (code, ecode)
    try:
        from azure.data.tables import TableTransactionError
        if isinstance(exc, TableTransactionError):
            code = exc.status_code or 0
            return ("unknown" if code in (500, 504) else "fail",
                    "%d batch" % code)
    except ImportError:
        pass
    # Not an answer nor a transport error: a bug of this script, which
    # the test reports rather than count as an outcome.
    return "error", "%s: %s" % (type(exc).__name__, str(exc)[:200])


def retrying(fn, deadline):
    """fn() until it succeeds, retrying what an SDK retries (503,
    timeouts, connection errors) until @deadline."""
    while True:
        try:
            return fn()
        except Exception as e:  # noqa: BLE001
            outcome, detail = classify(e)
            retryable = outcome == "unknown" or detail.startswith("503")
            if not retryable or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def cmd_wait(args):
    end = time.monotonic() + args.timeout
    for url in args.fe:
        svc = service(args, url)
        retrying(lambda: list(svc.list_tables()), end)
    print(json.dumps({"ok": True}))


def cmd_status(args):
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *a, **kw):
            return None
    opener = urllib.request.build_opener(NoRedirect,
                                         urllib.request.ProxyHandler({}))
    req = urllib.request.Request(args.url)
    if args.token_file:
        with open(args.token_file) as f:
            req.add_header("Authorization", "Bearer " + f.read().strip())
    try:
        with opener.open(req, timeout=3) as r:
            sys.stdout.write(r.read().decode())
            return 0
    except (urllib.error.URLError, OSError) as e:
        sys.stderr.write("%s\n" % e)
        return 3


def cmd_load(args):
    """Phase 1: N entities through each front end, read through the
    other. Prints {"written": {fe: n}, "read": {fe: n}, "mismatch": [...]}."""
    end = time.monotonic() + 60
    fes = args.fe
    svc = service(args, fes[0])
    try:
        retrying(lambda: svc.create_table(TABLE), end)
    except ResourceExistsError:
        pass
    written = {}
    for i, url in enumerate(fes):
        tc = service(args, url).get_table_client(TABLE)
        pk = "load-fe%d" % (i + 1)
        ents = [{"PartitionKey": pk, "RowKey": "r%05d" % j, "v": j,
                 "via": url} for j in range(args.n)]
        half = args.n // 2
        # Upserts: a retry after an attempt of unknown outcome is harmless.
        for e in ents[:half]:
            retrying(lambda e=e: tc.upsert_entity(e), end)
        rest = ents[half:]
        for k in range(0, len(rest), 20):
            ops = [("upsert", e) for e in rest[k:k + 20]]
            retrying(lambda ops=ops: tc.submit_transaction(ops), end)
        written[url] = {e["RowKey"]: e["v"] for e in ents}
    read, mismatch = {}, []
    for i, url in enumerate(fes):
        other = fes[(i + 1) % len(fes)]
        tc = service(args, other).get_table_client(TABLE)
        pk = "load-fe%d" % (i + 1)
        got = retrying(lambda: {e["RowKey"]: e["v"] for e in tc.query_entities(
            "PartitionKey eq '%s'" % pk)}, end)
        read[url] = len(got)
        if got != written[url]:
            mismatch.append({"written_via": url, "read_via": other,
                             "missing": sorted(set(written[url]) - set(got)),
                             "extra": sorted(set(got) - set(written[url]))})
    print(json.dumps({"written": {u: len(w) for u, w in written.items()},
                      "read": read, "mismatch": mismatch}))
    return 0


class History:
    def __init__(self, path):
        self.f = open(path, "a", buffering=1)
        self.lock = threading.Lock()

    def add(self, rec):
        with self.lock:
            self.f.write(json.dumps(rec) + "\n")


def writer(args, hist, url, name, batch, stop):
    """One key space, written by this thread only: single upserts cycling
    over 10 rows, or batches upserting BATCH_ROWS rows with one value."""
    tc = service(args, url).get_table_client(TABLE)
    pk = "w-" + name
    seq = 0  # an Edm.Int32: the namespaces, hence the table, are new
    i = 0
    while not os.path.exists(stop):
        seq += 1
        t0 = time.time()
        if batch:
            rows = ["b%d" % j for j in range(BATCH_ROWS)]
            call = lambda: tc.submit_transaction(  # noqa: E731
                [("upsert", {"PartitionKey": pk, "RowKey": r, "v": seq},
                  {"mode": UpdateMode.REPLACE}) for r in rows])
        else:
            rows = ["r%d" % (i % 10)]
            call = lambda: tc.upsert_entity(  # noqa: E731
                {"PartitionKey": pk, "RowKey": rows[0], "v": seq},
                mode=UpdateMode.REPLACE)
        try:
            call()
            outcome, detail = "ok", ""
        except Exception as e:  # noqa: BLE001
            outcome, detail = classify(e)
        hist.add({"op": "batch" if batch else "write", "fe": url,
                  "writer": name, "pk": pk, "rows": rows, "v": seq,
                  "t0": t0, "t1": time.time(), "outcome": outcome,
                  "detail": detail})
        if outcome == "ok":
            i += 1
        else:
            time.sleep(0.1)


def reader(args, hist, url, name, pks, stop):
    """Point reads of the writers' rows (through another front end than
    the one that wrote them, when there are two)."""
    tc = service(args, url).get_table_client(TABLE)
    i = 0
    while not os.path.exists(stop):
        pk = pks[i % len(pks)]
        row = "b0" if pk.endswith("-b") else "r%d" % (i // len(pks) % 10)
        i += 1
        t0 = time.time()
        try:
            e = tc.get_entity(pk, row)
            outcome, detail, v = "ok", "", e["v"]
        except Exception as ex:  # noqa: BLE001
            outcome, detail = classify(ex)
            v = None
            if detail.startswith("404"):
                outcome = "ok"
        hist.add({"op": "read", "fe": url, "reader": name, "pk": pk,
                  "rows": [row], "v": v, "t0": t0, "t1": time.time(),
                  "outcome": outcome, "detail": detail})
        time.sleep(0.05 if outcome == "ok" else 0.1)


def cmd_run(args):
    hist = History(args.history)
    threads = []
    names = []
    for i, url in enumerate(args.fe):
        for batch in (False, True):
            name = "fe%d-%s" % (i + 1, "b" if batch else "s")
            names.append(name)
            threads.append(threading.Thread(
                target=writer, args=(args, hist, url, name, batch,
                                     args.stop), daemon=True))
    for i, url in enumerate(args.fe):
        # Reads go through the front end that did not write the rows.
        pks = ["w-" + n for n in names if not n.startswith("fe%d-" % (i + 1))]
        threads.append(threading.Thread(
            target=reader, args=(args, hist, url, "rd%d" % (i + 1),
                                 pks or ["w-" + n for n in names],
                                 args.stop), daemon=True))
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=args.read_timeout + args.connect_timeout + 30)
    print(json.dumps({"ok": True}))
    return 0


def cmd_dump(args):
    end = time.monotonic() + 60
    out = {}
    for url in args.fe:
        tc = service(args, url).get_table_client(TABLE)
        ents = retrying(lambda: list(tc.query_entities(
            "PartitionKey ge 'w-'")), end)
        out[url] = {"%s/%s" % (e["PartitionKey"], e["RowKey"]): e["v"]
                    for e in ents}
    print(json.dumps(out))
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=("wait", "status", "load", "run", "dump"))
    ap.add_argument("--fe", action="append", default=[])
    ap.add_argument("--url")
    ap.add_argument("--token-file")
    ap.add_argument("--account", default="devstoreaccount1")
    ap.add_argument("--key", default="")
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--history")
    ap.add_argument("--stop")
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--connect-timeout", type=float, default=2)
    ap.add_argument("--read-timeout", type=float, default=5)
    args = ap.parse_args()
    return {"wait": cmd_wait, "status": cmd_status, "load": cmd_load,
            "run": cmd_run, "dump": cmd_dump}[args.cmd](args) or 0


if __name__ == "__main__":
    sys.exit(main())
