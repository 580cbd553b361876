#!/usr/bin/env python3
"""Helpers of bench/bench-repl-goals (called by it, one subcommand each).

  failover   one kill: waits for a fully in-sync range, kill -9 of its
             primary (found in the master's status, mapped to a PID by the
             port files), then writes to the range until one succeeds;
             prints one JSON line with the time from the kill to that write.
  rerep      watches the master's status while a secondary is killed under
             load and prints the re-replication time and rate (JSON).
  summary    the table of every phase's results against the issue's goals.
  profile    one rt-load insert run with the servers' /metrics and every
             process's CPU read before and after (bench/profile-repl).

A probe write is a single-entity insert signed with SharedKey (the
development account), sent over a keep-alive connection with a 10 s
timeout; a failed attempt is retried after 10 ms (on a new connection
after a network error). --probes writers (8) run from the kill on, each
alone on its connection, started --stagger-ms (50) apart so that together
they cover the front end's 400 ms retry cycle: the first success of any
of them, 20 ms or more after the kill, ends the measurement. So a request the
front end holds across the failover counts as well as one sent after it,
and the number is when the range takes writes again, not how long a queue
drains. Python is fast enough: each probe sends one request at a time, the
load comes from rt-load beside it.
"""
import base64
import hashlib
import hmac
import http.client
import json
import os
import random
import signal
import sys
import threading
import time
import urllib.request
from email.utils import formatdate

DEV_ACCOUNT = "devstoreaccount1"
DEV_KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/"
           "K1SZFPTOtr/KBHBeksoGMGw==")


def status(master_http):
    with urllib.request.urlopen("http://%s/api/status" % master_http,
                                timeout=2) as r:
        return json.load(r)


def table_range(st, table):
    r = [x for x in st.get("ranges", []) if x.get("table") == table]
    return r[0] if r else None


def server_addr(st, sid):
    for s in st.get("servers", []):
        if s.get("id") == sid:
            return s.get("addr")
    return None


def pid_of_addr(run_dir, pids, addr):
    """psN.ports holds rpc=PORT of the N-th server, started as pids[N-1]."""
    port = addr.rsplit(":", 1)[1]
    for i, pid in enumerate(pids, 1):
        try:
            with open(os.path.join(run_dir, "ps%d.ports" % i)) as f:
                if "rpc=%s\n" % port in f.read() + "\n":
                    return pid
        except OSError:
            pass
    return None


class Writer:
    """Single-entity inserts into one table through the front end."""

    def __init__(self, endpoint, table, timeout):
        hostport = endpoint.split("//", 1)[1].split("/", 1)[0]
        self.host, self.port = hostport.rsplit(":", 1)
        self.path = "/%s/%s" % (DEV_ACCOUNT, table)
        self.key = base64.b64decode(DEV_KEY)
        self.timeout = timeout
        self.conn = None
        self.n = 0
        self.tag = "%08x" % random.getrandbits(32)

    def insert(self):
        """Returns the HTTP status, or 0 on a network error or timeout."""
        self.n += 1
        body = json.dumps({"PartitionKey": "probe%s" % self.tag,
                           "RowKey": "r%09d" % self.n,
                           "V": "x" * 64}).encode()
        date = formatdate(usegmt=True)
        sts = "POST\n\napplication/json\n%s\n/%s%s" % (date, DEV_ACCOUNT,
                                                       self.path)
        sig = base64.b64encode(hmac.new(self.key, sts.encode(),
                                        hashlib.sha256).digest()).decode()
        hdr = {"Content-Type": "application/json",
               "Accept": "application/json;odata=nometadata",
               "Prefer": "return-no-content",
               "x-ms-date": date, "x-ms-version": "2019-02-02",
               "DataServiceVersion": "3.0",
               "Authorization": "SharedKey %s:%s" % (DEV_ACCOUNT, sig)}
        try:
            if self.conn is None:
                self.conn = http.client.HTTPConnection(
                    self.host, int(self.port), timeout=self.timeout)
            self.conn.request("POST", self.path, body, hdr)
            r = self.conn.getresponse()
            r.read()
            return r.status
        except (OSError, http.client.HTTPException):
            if self.conn is not None:
                self.conn.close()
            self.conn = None
            return 0


def cmd_failover(a):
    w = Writer(a.endpoint, a.table, a.timeout)
    pids = [int(x) for x in a.pids.split(",")]
    deadline = time.monotonic() + 30
    rng = None
    # A range whose whole set is in sync and takes writes: the state a
    # failover is measured from.
    while time.monotonic() < deadline:
        try:
            rng = table_range(status(a.master_http), a.table)
        except OSError:
            rng = None
        if (rng and len(rng.get("insync", [])) >= a.rf
                and w.insert() in (201, 204)):
            break
        time.sleep(0.1)
    else:
        print(json.dumps({"error": "range not in sync after 30 s"}))
        return 1
    # The master suspects no server sooner than --failover-after-ms +
    # --lease-ms (3 s by default) after its own start, so a kill right
    # after the cluster came up would measure that guard: wait --settle
    # first, then a random part of a second so kills fall anywhere in the
    # heartbeat and support periods.
    time.sleep(a.settle + random.uniform(0.0, 1.0))
    st = status(a.master_http)
    rng = table_range(st, a.table)
    old = rng["primary"]
    pid = pid_of_addr(a.run_dir, pids, server_addr(st, old))
    if pid is None:
        print(json.dumps({"error": "no pid for primary %s" % old}))
        return 1
    # Several probes: a request held by the front end across the failover
    # and a fresh one sent after it both count, whichever succeeds first.
    done = threading.Event()
    first = []
    tries = [0]
    lock = threading.Lock()

    def probe(wr):
        while not done.is_set():
            with lock:
                tries[0] += 1
            code = wr.insert()
            now = time.monotonic()
            if code in (201, 204) and now - t0 > 0.02:
                with lock:
                    first.append(now)
                done.set()
            elif code not in (201, 204):
                time.sleep(0.01)

    probes = [Writer(a.endpoint, a.table, a.timeout)
              for _ in range(a.probes)]
    for p in probes:
        p.insert()  # connected before the kill
    t0 = time.monotonic()
    kill_unix = time.time()
    os.kill(pid, signal.SIGKILL)
    ths = [threading.Thread(target=probe, args=(p,), daemon=True)
           for p in probes]
    # Staggered: the front end retries a request it could not send after
    # 100 and then 300 ms (FE_ROUTE_WAIT1_MS / WAIT2_MS) and then answers
    # 503, so probes started together would retry in step and see the
    # range back only at their common retry times.
    for th in ths:
        th.start()
        time.sleep(a.stagger_ms / 1000.0)
    done.wait(a.give_up)
    done.set()
    ok_ms = (min(first) - t0) * 1000.0 if first else None
    tries = tries[0]
    new = None
    try:
        new = table_range(status(a.master_http), a.table).get("primary")
    except (OSError, AttributeError):
        pass
    print(json.dumps({"killed_pid": pid, "old_primary": old,
                      "new_primary": new, "ms": ok_ms, "attempts": tries,
                      "kill_unix": round(kill_unix, 3)}))
    return 0 if ok_ms is not None else 1


def cmd_rerep(a):
    """Kills a secondary of the table's range (not the primary) and follows
    the master's status: the time a replica not in the ISR appears on
    another server (the learner), and the time it joins the ISR."""
    pids = [int(x) for x in a.pids.split(",")]
    st = status(a.master_http)
    rng = table_range(st, a.table)
    if not rng:
        print(json.dumps({"error": "no range"}))
        return 1
    sec = [s for s in rng["insync"] if s != rng["primary"]]
    victim = sec[0]
    pid = pid_of_addr(a.run_dir, pids, server_addr(st, victim))
    before = set(rng["replicas"])
    size = 0
    for s in st["servers"]:
        if s["id"] == rng["primary"]:
            size = s.get("load", {}).get("bytes", 0)
    t0 = time.time()
    os.kill(pid, signal.SIGKILL)
    t_add = t_join = None
    learner = None
    why = None
    while time.time() - t0 < a.give_up:
        try:
            rng = table_range(status(a.master_http), a.table)
        except OSError:
            time.sleep(0.1)
            continue
        new = [s for s in rng.get("replicas", []) if s not in before]
        if new and t_add is None:
            t_add = time.time()
            learner = new[0]
        if learner is not None and learner in rng.get("insync", []):
            t_join = time.time()
            break
        if learner is not None and learner not in rng.get("replicas", []):
            why = ("learner on server %s removed %.0f s after it was added, "
                   "never in the ISR" % (learner, time.time() - t_add))
            break
        if t_add is None and time.time() - t0 > a.add_within:
            why = ("no learner %.0f s after the kill (--rereplicate-after-ms "
                   "%s)" % (a.add_within, a.after_ms))
            break
        time.sleep(0.1)
    out = {"victim": victim, "learner": learner, "bytes": size,
           "kill_unix": t0, "add_unix": t_add, "join_unix": t_join}
    if t_add and t_join and t_join > t_add:
        out["copy_s"] = t_join - t_add
        out["mb_s"] = size / 1e6 / (t_join - t_add)
    elif why is None:
        why = ("learner on server %s added %.1f s after the kill, not in the "
               "ISR %.0f s later (do the partition servers catch learners "
               "up yet?)" % (learner, t_add - t0, time.time() - t_add))
    if why:
        out["error"] = why
    print(json.dumps(out))
    return 0 if t_join else 1


def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def cmd_summary(a):
    d = a.dir
    rows = []

    def ins(name):
        j = load_json(os.path.join(d, name + ".json"))
        if not j:
            return None
        al = j["all"]
        bad = sum(al.get(k, 0) for k in ("errors", "throttled", "not_found",
                                         "conflict", "timeouts"))
        return (al["ops_per_s"], al["latency_ms"]["p50"],
                al["latency_ms"]["p99"], bad)

    def nranges(name):
        j = load_json(os.path.join(d, name + "-status.json"))
        if not j:
            return "-"
        return str(len([r for r in j.get("ranges", [])
                        if r.get("table") == "goals"]))

    def rounds(name):
        """(median row, [rows]) of the NAME-rK phases (or NAME)."""
        rows = []
        k = 1
        while ins("%s-r%d" % (name, k)):
            rows.append(ins("%s-r%d" % (name, k)))
            k += 1
        if not rows:
            one = ins(name)
            return one, [one] if one else []
        return sorted(rows)[len(rows) // 2], rows

    (r1, r1s), (r3, r3s) = rounds("rt-rf1"), rounds("rt-rf3")
    et, ets = rounds("etcd3")

    def med(v):
        return sorted(v)[len(v) // 2] if v else None

    # Each round's ratios: its phases ran back to back, so the background
    # load of a shared machine moves them alike.
    ratios = [b[0] / a[0] for a, b in zip(r1s, r3s) if a and b and a[0]]
    eratios = [b[0] / e[0] for e, b in zip(ets, r3s) if e and b and e[0]]
    print()
    print("durable single inserts through HTTP, one client (rt-load), "
          "%s connections, %s values, %s s" % (a.clients, a.size, a.seconds))
    hdr = "%-28s %10s %9s %9s %8s %7s" % ("system", "writes/s", "p50 ms",
                                          "p99 ms", "non-2xx", "ranges")
    print(hdr)
    print("-" * len(hdr))
    for name, r, f in (("rangetable RF 1 (median)", r1, "rt-rf1-r1"),
                       ("rangetable RF 3 (median)", r3, "rt-rf3-r1"),
                       ("etcd 3.4, 3 members (median)", et, "")):
        if r:
            print("%-28s %10.0f %9.2f %9.2f %8d %7s"
                  % ((name,) + r + (nranges(f) if f else "-",)))
        else:
            print("%-28s %10s" % (name, "skipped"))
    print()
    print("goals (issue / docs/DESIGN-replication.md §11.4):")

    def goal(text, val, want, fmt):
        if val is None:
            print("  %-44s %s" % (text, "n/a (skipped)"))
        else:
            print("  %-44s %s  %s" % (text, fmt % val,
                                      "met" if val >= want else "NOT met"))

    if len(eratios) > 1:
        print("  rounds, etcd / RF 3 writes/s (ratio): %s"
              % ", ".join("%.0f / %.0f (%.2f)" % (e[0], b[0], b[0] / e[0])
                          for e, b in zip(ets, r3s) if e and b and e[0]))
    goal("RF 3 inserts >= 3x etcd's three members", med(eratios), 3.0,
         "%.2fx")
    if len(ratios) > 1:
        print("  rounds, RF 1 / RF 3 writes/s (ratio): %s"
              % ", ".join("%.0f / %.0f (%.2f)" % (a[0], b[0], b[0] / a[0])
                          for a, b in zip(r1s, r3s) if a and b and a[0]))
    goal("RF 3 inserts >= 60% of RF 1", med(ratios), 0.6, "%.2fx")
    fo = []
    fails = 0
    try:
        with open(os.path.join(d, "failover.jsonl")) as f:
            for line in f:
                try:
                    j = json.loads(line)
                except ValueError:
                    continue
                if j.get("ms") is None:
                    fails += 1
                else:
                    fo.append(j["ms"])
    except OSError:
        pass
    if fo or fails:
        s = [x / 1000.0 for x in fo]
        print("  failover, kill -9 of the primary -> first write (%d kills%s):"
              % (len(fo) + fails,
                 ", %d without a write in %ss" % (fails, a.give_up)
                 if fails else ""))
        print("    min %.2f  p50 %.2f  p90 %.2f  p99 %.2f  max %.2f s"
              % (min(s), pct(s, 50), pct(s, 90), pct(s, 99), max(s)))
        p99 = pct(s, 99) if not fails else float("inf")
        print("  %-44s %.2f s  %s" % ("failover p99 <= 3 s", p99,
                                     "met" if p99 <= 3.0 else "NOT met"))
    else:
        print("  %-44s %s" % ("failover p99 <= 3 s", "n/a (skipped)"))
    rr = load_json(os.path.join(d, "rerep.json"))
    if rr and rr.get("mb_s") is not None:
        print("  re-replication: %.1f MB in %.1f s = %.1f MB/s, foreground "
              "p99 during it %s ms (before %s ms)"
              % (rr["bytes"] / 1e6, rr["copy_s"], rr["mb_s"],
                 rr.get("fg_p99_during", "?"), rr.get("fg_p99_before", "?")))
    else:
        why = (rr or {}).get("skipped") or (rr or {}).get("error") or \
            "n/a (skipped)"
        print("  re-replication: %s" % why)
    for f in ("load-before", "load-after"):
        try:
            print("%s: %s" % (f, open(os.path.join(d, f)).read().strip()))
        except OSError:
            pass
    return 0


def cmd_fg(a):
    """Adds the foreground p99 before and during the copy to rerep.json,
    from rt-load's per-second CSV."""
    rr = load_json(a.rerep) or {}
    if not rr.get("add_unix") or not rr.get("join_unix"):
        return 0
    before, during = [], []
    with open(a.csv) as f:
        head = f.readline().strip().split(",")
        iu, ip = head.index("unix_time"), head.index("p99_ms")
        for line in f:
            c = line.strip().split(",")
            try:
                t, p = float(c[iu]), float(c[ip])
            except (ValueError, IndexError):
                continue
            if t < rr["kill_unix"]:
                before.append(p)
            elif rr["add_unix"] - 1 <= t <= rr["join_unix"]:
                during.append(p)
    if before:
        rr["fg_p99_before"] = round(max(before), 2)
    if during:
        rr["fg_p99_during"] = round(max(during), 2)
    with open(a.rerep, "w") as f:
        json.dump(rr, f)
    return 0


COUNTERS = ("rt_ps_group_commits_total", "rt_ps_group_commit_seconds_total",
            "rt_ps_group_commit_size_sum")
GAUGES = ("rt_ps_pending_ops", "rt_ps_repl_held_write_ops")


def metrics(hostport):
    """The partition server's counters and gauges we need, from GET
    /metrics (published by the server once a second)."""
    out = {}
    with urllib.request.urlopen("http://%s/metrics" % hostport,
                                timeout=2) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("#") or " " not in line:
                continue
            name, val = line.rsplit(" ", 1)
            if name in COUNTERS or name in GAUGES:
                out[name] = float(val)
    return out


def metrics_fresh(hostport):
    """(metrics, time) just after the server published them: polls every
    20 ms until the group counter moves (an idle server: after 1.1 s), so
    a rate over a window is not off by up to a publish period at each
    end."""
    m0 = metrics(hostport)
    t_end = time.monotonic() + 1.1
    while time.monotonic() < t_end:
        time.sleep(0.02)
        m = metrics(hostport)
        if m.get(COUNTERS[0]) != m0.get(COUNTERS[0]):
            return m, time.monotonic()
    return m0, time.monotonic()


def cpu_s(pid):
    """User + system CPU seconds of a process (and its threads)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            f = f.read().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return 0.0


def cmd_profile(a):
    """Counters are read fresh at both ends of the window; the gauges
    (ops queued for or in the writer's commit, ops of writes waiting for
    their replicas) are sampled every second in between. Little's law
    turns their means into the mean time an op spends in each stage:
    mean(ops in stage) / ops per second."""
    import subprocess
    procs = dict(x.split("=") for x in a.procs.split(","))
    procs = {k: int(v) for k, v in procs.items()}
    mets = dict(x.split("=") for x in a.metrics.split(",")) \
        if a.metrics else {}
    load = subprocess.Popen(a.load, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    time.sleep(a.warmup)
    t0 = time.monotonic()
    c0 = {k: cpu_s(p) for k, p in procs.items()}
    c0["rt-load"] = cpu_s(load.pid)
    m0 = {k: metrics_fresh(v) for k, v in mets.items()}
    samples = {k: [] for k in mets}
    # Sample the gauges until ~1.5 s before the client stops (leaving
    # time for the fresh read at the end).
    while time.monotonic() - t0 < a.seconds - 1.5:
        for k, v in mets.items():
            try:
                samples[k].append(metrics(v))
            except OSError:
                pass
        time.sleep(1.0)
    m1 = {k: metrics_fresh(v) for k, v in mets.items()}
    c1 = {k: cpu_s(p) for k, p in procs.items()}
    c1["rt-load"] = cpu_s(load.pid)
    dt = time.monotonic() - t0
    load.wait()
    out = {"window_s": dt, "cpu_pct": {}, "servers": {}}
    for k in c1:
        out["cpu_pct"][k] = round(100.0 * (c1[k] - c0[k]) / dt, 1)
    for k in m1:
        (v0, t_0), (v1, t_1) = m0[k], m1[k]
        w = max(t_1 - t_0, 1e-3)
        g = v1[COUNTERS[0]] - v0[COUNTERS[0]]
        us = (v1[COUNTERS[1]] - v0[COUNTERS[1]]) * 1e6
        ops = v1[COUNTERS[2]] - v0[COUNTERS[2]]
        sv = {"groups_s": round(g / w, 1),
              "ops_s": round(ops / w, 1),
              "ops_per_group": round(ops / g, 2) if g else 0,
              "commit_ms": round(us / g / 1000.0, 3) if g else 0,
              "writer_busy_pct": round(100.0 * us / 1e6 / w, 1)}
        for gname, short in ((GAUGES[0], "writer"), (GAUGES[1], "held")):
            xs = [x[gname] for x in samples[k] if gname in x]
            if xs:
                mean = sum(xs) / len(xs)
                sv[short + "_ops_mean"] = round(mean, 1)
                if ops:
                    sv[short + "_ms"] = round(1000.0 * mean / (ops / w), 2)
        out["servers"][k] = sv
    print(json.dumps(out))
    return 0


def main():
    import argparse
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("failover")
    r = sub.add_parser("rerep")
    for p in (f, r):
        p.add_argument("--endpoint", required=True)
        p.add_argument("--master-http", required=True)
        p.add_argument("--run-dir", required=True)
        p.add_argument("--pids", required=True)
        p.add_argument("--table", required=True)
        p.add_argument("--give-up", type=float, default=30.0)
    r.add_argument("--after-ms", type=int, default=2000,
                   help="the master's --rereplicate-after-ms")
    r.add_argument("--add-within", type=float, default=30.0,
                   help="give up when no learner appears this long after "
                   "the kill")
    f.add_argument("--rf", type=int, default=3)
    f.add_argument("--timeout", type=float, default=10.0)
    f.add_argument("--probes", type=int, default=8)
    f.add_argument("--stagger-ms", type=float, default=50.0)
    f.add_argument("--settle", type=float, default=4.0)
    f.add_argument("--seed", type=int, default=0)
    s = sub.add_parser("summary")
    s.add_argument("--dir", required=True)
    s.add_argument("--clients", default="32")
    s.add_argument("--size", default="1k")
    s.add_argument("--seconds", default="20")
    s.add_argument("--give-up", default="30")
    pr = sub.add_parser("profile")
    pr.add_argument("--procs", required=True, help="name=pid,...")
    pr.add_argument("--metrics", default="", help="name=host:port,...")
    pr.add_argument("--warmup", type=float, default=2.0)
    pr.add_argument("--seconds", type=float, required=True)
    pr.add_argument("load", nargs="+", help="the rt-load command")
    g = sub.add_parser("fg")
    g.add_argument("--rerep", required=True)
    g.add_argument("--csv", required=True)
    a = ap.parse_args()
    if a.cmd == "failover":
        random.seed(a.seed or None)
        return cmd_failover(a)
    if a.cmd == "rerep":
        return cmd_rerep(a)
    if a.cmd == "fg":
        return cmd_fg(a)
    if a.cmd == "profile":
        return cmd_profile(a)
    return cmd_summary(a)


if __name__ == "__main__":
    sys.exit(main())
