"""rangetable on several hosts: nine network namespaces on one bridge.

netns.Topology builds the hosts m1 m2 m3 (masters, one Raft group), ps1
ps2 ps3 (partition servers, zones z1 z2 z3), fe1 fe2 (front ends) and cl
(the client), each with one address of 10.231.0.0/24 that exists only
inside the namespaces, and a name, <host>.rt.internal, in every
namespace's /etc/hosts. Every daemon runs in its host's namespace from the
example configs of deploy/examples/ with the addresses substituted
(node_config), bound to its host's address (the masters' status HTTP on
its loopback, as in the example). The client, mh_client.py in the cl
namespace, uses only the official SDK with an accounts-file key and dials
the front ends by name.

  - load: the table is created through fe1, N entities are written
    through each front end (one by one and in batches) and read back
    through the other;
  - cut a partition server: the server holding the table's primary loses
    its link (at the switch: packets vanish, nothing is reset) while
    writers (single upserts and batches) and readers run through both
    front ends; the master fails the range over, writes and reads
    continue through both front ends, the link comes back, and the
    server is waited for back in the range's in-sync set;
  - cut the master leader: the same writers go on (the data path does
    not need the master) while the other two masters elect a leader;
  - then every acknowledged write reads back, through both front ends,
    with its last acknowledged value (or the value of a later attempt of
    unknown outcome), no attempt answered with an error (other than a
    timeout, 500 or 504) left its value, each batch's rows hold one
    attempt's value (all or nothing), and reads never went back in time;
    the cut server and master are back (up, a caught-up member) once
    their links return; every daemon exits 0 on SIGTERM, no sanitizer
    report. The failover window each writer and reader saw is printed.

Needs root and iproute2 (skipped otherwise). About 30-45 s.
"""

import json
import os
import secrets
import base64
import signal
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import netns  # noqa: E402
from rtcluster import (REPO_ROOT, SANITIZER_MARKERS,  # noqa: E402
                       find_build_dir)

_ok, _why = netns.available()
if not _ok:
    pytest.skip("network namespaces need root and iproute2: %s" % _why,
                allow_module_level=True)

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENT = os.path.join(HERE, "mh_client.py")
PYTHON = "/usr/bin/python3"
EXAMPLES = os.path.join(REPO_ROOT, "deploy", "examples")

SUBNET = "10.231.0.0/24"
# Last octet of each host's address.
HOSTS = {"m1": 11, "m2": 12, "m3": 13, "ps1": 21, "ps2": 22, "ps3": 23,
         "fe1": 31, "fe2": 32, "cl": 41}
MASTERS = ["m1", "m2", "m3"]
PSS = ["ps1", "ps2", "ps3"]
FES = ["fe1", "fe2"]
# The example configs' ports.
MS_RPC, MS_HTTP, MS_RAFT, PS_RPC, FE_HTTP = 10100, 10101, 10102, 10200, 10002
ACCOUNT = "mhaccount"
# Every namespace's /etc/hosts names each host "<host>.rt.internal".
DOMAIN = "rt.internal"
# Whether the addresses daemons dial (--master, --advertise) are names:
# the RPC client of this tree takes numeric addresses only (rt_addr.h);
# True once it resolves names (env RT_MH_DIAL_BY_NAME=1 tries it).
# Listeners and raft peers stay numeric.
DIAL_BY_NAME = os.environ.get("RT_MH_DIAL_BY_NAME", "0") == "1"
N_LOAD = 100
START_TIMEOUT = 60.0
STOP_TIMEOUT = 15.0


def admin_token_file(workdir):
    """The masters' admin token (WORKDIR/admin.token, 0600, made once):
    the example's admin-token-file, on every master."""
    path = os.path.join(workdir, "admin.token")
    if not os.path.exists(path):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32) + "\n")
    return path


def security_flags(kind, workdir):
    """Flags every daemon of @kind gets for cluster security (the RPC
    credential, the admin token). The one place to add them."""
    if kind == "master":
        return ["--admin-token-file", admin_token_file(workdir)]
    return []


def node_config(kind, host, topo, workdir):
    """Writes @host's config, the example deploy/examples/<kind>.conf with
    this cluster's addresses and paths substituted, and returns its path.
    @kind: master, partition-server, frontend. The one place that maps an
    example to a host: point it at a per-host example set (one file per
    host, e.g. deploy/examples/cluster/) by changing the file read and
    @subst."""
    ip = topo.ip(host)

    def dial(h):
        return topo.name(h) if DIAL_BY_NAME else topo.ip(h)
    masters = ",".join("%s:%d" % (dial(m), MS_RPC) for m in MASTERS)
    if kind == "master":
        i = MASTERS.index(host) + 1
        subst = {"listen": "%s:%d" % (ip, MS_RPC),
                 "http": "127.0.0.1:%d" % MS_HTTP,
                 "data": os.path.join(workdir, host),
                 "id": str(i),
                 "raft-listen": "%s:%d" % (ip, MS_RAFT),
                 "peers": ",".join("%d=%s:%d" % (j + 1, topo.ip(m), MS_RAFT)
                                   for j, m in enumerate(MASTERS))}
    elif kind == "partition-server":
        subst = {"listen": "%s:%d" % (ip, PS_RPC),
                 "advertise": "%s:%d" % (dial(host), PS_RPC),
                 "master": masters,
                 "data": os.path.join(workdir, host),
                 "zone": "z%d" % (PSS.index(host) + 1)}
    else:
        subst = {"listen": "%s:%d" % (ip, FE_HTTP),
                 "master": masters,
                 "accounts": os.path.join(workdir, "accounts")}
    if "data" in subst:
        os.makedirs(subst["data"], exist_ok=True)
    out, seen = [], set()
    with open(os.path.join(EXAMPLES, kind + ".conf")) as f:
        for line in f:
            key = line.split("=", 1)[0].strip()
            if not line.lstrip().startswith("#") and "=" in line and \
                    key in subst:
                line = "%s = %s\n" % (key, subst[key])
                seen.add(key)
            out.append(line)
    out += ["%s = %s\n" % (k, v) for k, v in subst.items() if k not in seen]
    path = os.path.join(workdir, "etc", "%s.conf" % host)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.writelines(out)
    return path


class Hosts:
    """The namespaces and the daemons in them."""

    def __init__(self, workdir):
        self.workdir = str(workdir)
        self.build = find_build_dir()
        self.topo = netns.Topology(list(HOSTS), SUBNET, addrs=HOSTS,
                                   domain=DOMAIN)
        self.procs = {}       # host -> Popen
        self.stderr = {}      # host -> path
        self.key = base64.b64encode(secrets.token_bytes(64)).decode()
        self.env = dict(os.environ)
        self.env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
        self.env.setdefault("UBSAN_OPTIONS",
                            "print_stacktrace=1:halt_on_error=1")

    def fe_url(self, host):
        """The front end's endpoint as the client dials it: by name."""
        return "http://%s:%d/%s" % (self.topo.name(host), FE_HTTP, ACCOUNT)

    def start(self):
        self.topo.create()
        os.makedirs(os.path.join(self.workdir, "logs"), exist_ok=True)
        acc = os.path.join(self.workdir, "accounts")
        with open(acc, "w") as f:
            f.write("%s %s\n" % (ACCOUNT, self.key))
        os.chmod(acc, 0o600)
        deadline = time.monotonic() + START_TIMEOUT
        for h in MASTERS:
            self._start(h, "master", "master/rt-master", ["--bootstrap"])
        self.wait(deadline, "a master leader", lambda: self.leader())
        for h in PSS:
            self._start(h, "partition-server",
                        "partition-server/rt-partition-server", [])
        self.wait(deadline, "3 partition servers up",
                  lambda: len(self.servers_up()) == 3)
        for h in FES:
            self._start(h, "frontend", "frontend/rt-frontend", [])
        r = self.client("wait", *self.fe_args(), "--timeout",
                        str(max(1, deadline - time.monotonic())))
        assert r.returncode == 0, r.stderr

    def _start(self, host, kind, binary, args):
        conf = node_config(kind, host, self.topo, self.workdir)
        log = os.path.join(self.workdir, "logs", host)
        argv = [os.path.join(self.build, binary), "--config", conf,
                "--port-file", os.path.join(self.workdir, host + ".ports"),
                "--log-level", os.environ.get("RT_LOG_LEVEL", "info")
                ] + args + security_flags(kind, self.workdir)
        self.stderr[host] = log + ".stderr"
        with open(log + ".stdout", "wb") as out, \
                open(log + ".stderr", "wb") as err:
            err.write(("# %s\n" % " ".join(argv)).encode())
            err.flush()
            self.procs[host] = self.topo.popen(host, argv, stdout=out,
                                               stderr=err, env=self.env,
                                               cwd=self.workdir)

    def wait(self, deadline, what, pred):
        while True:
            for h, p in self.procs.items():
                if p.poll() is not None:
                    raise AssertionError("%s exited %s while waiting for %s"
                                         "\n%s" % (h, p.returncode, what,
                                                   self.tail(h)))
            if pred():
                return
            if time.monotonic() > deadline:
                raise AssertionError("timed out waiting for %s\n%s"
                                     % (what, "\n".join(
                                         self.tail(h) for h in self.procs)))
            time.sleep(0.2)

    def tail(self, host, n=20):
        try:
            with open(self.stderr[host], errors="replace") as f:
                return "--- %s:\n%s" % (host, "".join(f.readlines()[-n:]))
        except (OSError, KeyError):
            return "--- %s: no stderr" % host

    def fe_args(self, hosts=FES):
        out = []
        for h in hosts:
            out += ["--fe", self.fe_url(h)]
        return out + ["--account", ACCOUNT, "--key", self.key]

    def client(self, *args, host="cl", timeout=120):
        return self.topo.run(host, [PYTHON, CLIENT] + list(args),
                             timeout=timeout, env=self.env)

    def status(self, masters=MASTERS):
        """The leader's /api/status, asked on each master's host over its
        loopback (where the example binds it); None if none answers 200."""
        for m in masters:
            if self.procs.get(m) is None or self.procs[m].poll() is not None:
                continue
            r = self.client("status", "--url", "http://127.0.0.1:%d/api/"
                            "status" % MS_HTTP, "--token-file",
                            admin_token_file(self.workdir), host=m,
                            timeout=10)
            if r.returncode == 0:
                try:
                    return json.loads(r.stdout)
                except ValueError:
                    pass
        return None

    def leader(self, masters=MASTERS):
        """The host of the acting leader, as the answering master says."""
        st = self.status(masters)
        if not st:
            return None
        for mem in st.get("masters", []):
            if mem.get("leader"):
                for m in MASTERS:
                    if mem.get("raft_addr") == "%s:%d" % (self.topo.ip(m),
                                                          MS_RAFT):
                        return m
        return None

    def servers_up(self):
        st = self.status() or {}
        return [s["addr"] for s in st.get("servers", [])
                if s.get("state") == "up"]

    def host_of_addr(self, addr):
        for h in HOSTS:
            if addr in ("%s:%d" % (self.topo.ip(h), PS_RPC),
                        "%s:%d" % (self.topo.name(h), PS_RPC)):
                return h
        return None

    def stop(self):
        """SIGTERM, front ends first, masters last; SIGKILL after
        STOP_TIMEOUT. Returns [(host, returncode)]."""
        exits = []
        for group in (FES, PSS, MASTERS):
            for h in group:
                p = self.procs.get(h)
                if p is not None and p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            for h in group:
                p = self.procs.get(h)
                if p is None:
                    continue
                try:
                    rc = p.wait(timeout=STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    p.kill()
                    rc = "SIGKILLed after %.0f s" % STOP_TIMEOUT
                    p.wait()
                exits.append((h, rc))
        return exits

    def sanitizer_reports(self):
        out = []
        for h, path in self.stderr.items():
            with open(path, errors="replace") as f:
                lines = f.readlines()
            for i, line in enumerate(lines):
                if any(m in line for m in SANITIZER_MARKERS):
                    out.append("%s:%d:\n%s" % (path, i + 1,
                                               "".join(lines[i:i + 30])))
                    break
        return out


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    h = Hosts(tmp_path_factory.mktemp("multihost"))
    sys.stderr.write("\n[multihost] namespaces %s*, logs in %s/logs\n"
                     % (h.topo.ns(""), h.workdir))
    try:
        h.start()
        yield h
        exits = h.stop()
        bad = [(n, rc) for n, rc in exits if rc != 0]
        assert not bad, "unclean exits %r\n%s" % (
            bad, "\n".join(h.tail(n) for n, _ in bad))
        reports = h.sanitizer_reports()
        assert not reports, "\n\n".join(reports)
    finally:
        h.stop()
        h.topo.teardown()


def wait_for(pred, timeout, step=0.25):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(step)
    return None


def test_load_through_both_front_ends(hosts):
    r = hosts.client("load", *hosts.fe_args(), "--n", str(N_LOAD))
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout)
    assert res["mismatch"] == [], res
    for fe in FES:
        assert res["written"][hosts.fe_url(fe)] == N_LOAD
        assert res["read"][hosts.fe_url(fe)] == N_LOAD


def table_primary(hosts):
    st = hosts.status() or {}
    by_id = {s["id"]: s["addr"] for s in st.get("servers", [])}
    for rg in st.get("ranges", []):
        if rg.get("table") == "multihost" and rg.get("primary"):
            return hosts.host_of_addr(by_id.get(rg["primary"]))
    return None


def in_sync(hosts, ps):
    """True when @ps is up and in the in-sync set of every range of the
    table."""
    st = hosts.status() or {}
    ids = [s["id"] for s in st.get("servers", [])
           if hosts.host_of_addr(s.get("addr")) == ps and
           s.get("state") == "up"]
    rgs = [r for r in st.get("ranges", []) if r.get("table") == "multihost"]
    return bool(ids and rgs) and all(ids[0] in r.get("insync", [])
                                     for r in rgs)


def rejoined(hosts, master):
    """True when the leader (not @master) sees @master reachable and
    caught up."""
    st = hosts.status([m for m in MASTERS if m != master]) or {}
    ms = st.get("masters", [])
    lead = next((m for m in ms if m.get("leader")), {})
    addr = "%s:%d" % (hosts.topo.ip(master), MS_RAFT)
    return any(m.get("raft_addr") == addr and m.get("reachable") and
               m.get("match_index", -1) >= lead.get("commit_index", 0)
               for m in ms)


def report(capsys, msg):
    """Prints a measurement past pytest's capture, so ctest's log (README
    line 2) shows it on success too."""
    with capsys.disabled():
        sys.stdout.write("\n" + msg + "\n")
        sys.stdout.flush()


def load_history(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def check_history(hist, dumps):
    """The checks of the module docstring. Returns a list of problems."""
    problems = []
    writes = sorted((h for h in hist if h["op"] != "read"),
                    key=lambda h: h["t0"])
    # Per row: the attempts in order (one writer thread per row).
    per_row = {}
    for w in writes:
        for row in w["rows"]:
            per_row.setdefault("%s/%s" % (w["pk"], row), []).append(w)
    failed = {k: {o["v"] for o in ops if o["outcome"] == "fail"}
              for k, ops in per_row.items()}
    for key, ops in per_row.items():
        acked = [i for i, o in enumerate(ops) if o["outcome"] == "ok"]
        last = acked[-1] if acked else -1
        allowed = set() if last < 0 else {ops[last]["v"]}
        allowed |= {o["v"] for o in ops[last + 1:] if o["outcome"] ==
                    "unknown"}
        for fe, state in dumps.items():
            got = state.get(key)
            if got is None and last < 0:
                continue
            if got not in allowed:
                problems.append("%s via %s: %r, expected one of %r (last "
                                "acknowledged %r)%s"
                                % (key, fe, got, sorted(allowed),
                                   ops[last]["v"] if last >= 0 else None,
                                   " - a FAILED attempt's value"
                                   if got in failed[key] else ""))
    # A batch is all or nothing: its rows hold one attempt's value.
    for fe, state in dumps.items():
        batches = {}
        for key, v in state.items():
            pk, row = key.split("/", 1)
            if pk.endswith("-b"):
                batches.setdefault(pk, set()).add(v)
        for pk, vs in batches.items():
            if len(vs) != 1:
                problems.append("batch rows of %s via %s differ: %r"
                                % (pk, fe, sorted(vs)))
    # Reads never go back before a write acknowledged before they began,
    # and never see a failed attempt's value.
    for rd in (h for h in hist if h["op"] == "read" and
               h["outcome"] == "ok"):
        key = "%s/%s" % (rd["pk"], rd["rows"][0])
        before = [o["v"] for o in per_row.get(key, [])
                  if o["outcome"] == "ok" and o["t1"] < rd["t0"]]
        if before and (rd["v"] is None or rd["v"] < before[-1]):
            problems.append("read of %s via %s at %.3f got %r after %r was "
                            "acknowledged" % (key, rd["fe"], rd["t0"],
                                              rd["v"], before[-1]))
        if rd["v"] in failed.get(key, ()):
            problems.append("read of %s via %s got the value of a failed "
                            "attempt %r" % (key, rd["fe"], rd["v"]))
    return problems


def windows(hist, t_from, t_to):
    """Per writer/reader: the longest time without a success overlapping
    [t_from, t_to], i.e. the unavailability the client saw."""
    out = {}
    for who in sorted({h.get("writer") or h.get("reader") for h in hist}):
        oks = sorted(h["t1"] for h in hist
                     if (h.get("writer") or h.get("reader")) == who and
                     h["outcome"] == "ok")
        gap, prev = 0.0, None
        for t in oks:
            if prev is not None and t >= t_from and prev <= t_to:
                gap = max(gap, t - prev)
            prev = t
        out[who] = round(gap, 2)
    return out


def progress_during(hist, t_from, t_to):
    """Per writer/reader: successes that began in [t_from, t_to]."""
    out = {}
    for h in hist:
        who = h.get("writer") or h.get("reader")
        out.setdefault(who, 0)
        if h["outcome"] == "ok" and t_from <= h["t0"] <= t_to:
            out[who] += 1
    return out


def test_cut_links_under_load(hosts, tmp_path, capsys):
    hist_path = str(tmp_path / "history.jsonl")
    stop = str(tmp_path / "stop")
    run = hosts.topo.popen("cl", [PYTHON, CLIENT, "run", *hosts.fe_args(),
                                  "--history", hist_path, "--stop", stop],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           env=hosts.env)
    phases = []
    try:
        time.sleep(3)
        # Phase 1: the partition server holding the table's primary.
        victim = wait_for(lambda: table_primary(hosts), 10)
        assert victim in PSS, victim
        t_cut = time.time()
        hosts.topo.link_down(victim)
        new = wait_for(lambda: (lambda p: p if p and p != victim else None)(
            table_primary(hosts)), 30)
        t_new = time.time()
        assert new, "no failover of the table's range off %s" % victim
        time.sleep(5)       # writes must go on for a while without it
        t_up = time.time()
        hosts.topo.link_up(victim)
        phases.append(("partition server %s (primary)" % victim, t_cut,
                       t_new, t_up))
        # The server back up and in the range's in-sync set again before
        # the next cut, so each phase shows one failure's effect.
        t0 = time.monotonic()
        assert wait_for(lambda: in_sync(hosts, victim), 30), \
            "%s not back in the table's in-sync set after its link " \
            "returned" % victim
        report(capsys, "[multihost] %s back in the in-sync set %.1f s "
               "after its link returned" % (victim, time.monotonic() - t0))
        time.sleep(1)

        # Phase 2: the master leader.
        leader = wait_for(lambda: hosts.leader(), 10)
        assert leader in MASTERS, leader
        others = [m for m in MASTERS if m != leader]
        t_cut = time.time()
        hosts.topo.link_down(leader)
        new = wait_for(lambda: (lambda m: m if m and m != leader else None)(
            hosts.leader(others)), 30)
        t_new = time.time()
        assert new, "no new master leader among %r" % others
        time.sleep(4)
        t_up = time.time()
        hosts.topo.link_up(leader)
        phases.append(("master leader %s" % leader, t_cut, t_new, t_up))
        time.sleep(3)
        # With their links back, the server is up again and the master a
        # reachable member of the group.
        t0 = time.monotonic()
        assert wait_for(lambda: len(hosts.servers_up()) == 3, 30), \
            "%s not up again after its link returned" % victim
        assert wait_for(lambda: rejoined(hosts, leader), 30), \
            "master %s not back in the group" % leader
        report(capsys, "[multihost] %s and %s back %.1f s after the last "
               "link returned" % (victim, leader,
                                  time.monotonic() - t0 + 3))
    finally:
        with open(stop, "w"):
            pass
        try:
            out, err = run.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            run.kill()
            out, err = run.communicate()
    assert run.returncode == 0, err.decode()[-3000:]

    hist = load_history(hist_path)
    bugs = [h for h in hist if h["outcome"] == "error"]
    assert not bugs, "the client script failed: %r" % bugs[:3]
    r = hosts.client("dump", *hosts.fe_args())
    assert r.returncode == 0, r.stderr[-3000:]
    dumps = json.loads(r.stdout)

    for name, t_cut, t_new, t_up in phases:
        w = windows(hist, t_cut, t_up)
        prog = progress_during(hist, t_new + 2, t_up)
        outcomes = {}
        for h in hist:
            if t_cut <= h["t0"] <= t_up and h["outcome"] != "ok":
                outcomes[h["detail"]] = outcomes.get(h["detail"], 0) + 1
        lat = sorted(h["t1"] - h["t0"] for h in hist
                     if t_cut <= h["t0"] <= t_up and h["outcome"] == "ok")
        report(capsys, "[multihost] cut %s: the status showed it after "
               "%.2f s; longest client gap per writer/reader %r (max "
               "%.2f s); successes after the failover %r; errors %r; "
               "latency of the successes while cut p50 %.3f s, p99 %.3f s, "
               "max %.3f s"
               % (name, t_new - t_cut, w, max(w.values()), prog, outcomes,
                  lat[len(lat) // 2], lat[len(lat) * 99 // 100], lat[-1]))
        # Writes and reads continue through both front ends once the
        # failover is done (for a while before the link returns).
        stalled = [who for who, n in prog.items() if n == 0]
        assert not stalled, "no success after the failover of %s: %r" % (
            name, stalled)

    oks = sum(1 for h in hist if h["op"] != "read" and h["outcome"] == "ok")
    assert oks > 0
    problems = check_history(hist, dumps)
    assert not problems, "\n".join(problems[:30])
    # Both front ends see the same table.
    urls = list(dumps)
    assert dumps[urls[0]] == dumps[urls[1]]


def test_history_checker_catches_violations():
    """check_history itself: each kind of violation it must report."""
    def w(pk, rows, v, outcome, t0):
        return {"op": "batch" if pk.endswith("-b") else "write", "pk": pk,
                "rows": rows, "v": v, "outcome": outcome, "t0": t0,
                "t1": t0 + 0.5, "fe": "fe1", "writer": pk}
    hist = [w("w-a", ["r0"], 1, "ok", 1), w("w-a", ["r0"], 2, "fail", 2),
            w("w-a", ["r0"], 3, "unknown", 3),
            w("w-b", ["b0", "b1"], 1, "ok", 1),
            w("w-b", ["b0", "b1"], 2, "unknown", 2),
            {"op": "read", "pk": "w-a", "rows": ["r0"], "v": 1,
             "outcome": "ok", "t0": 5, "t1": 5.1, "fe": "fe2"}]
    good = {"fe1": {"w-a/r0": 3, "w-b/b0": 2, "w-b/b1": 2},
            "fe2": {"w-a/r0": 1, "w-b/b0": 1, "w-b/b1": 1}}
    assert check_history(hist, good) == []
    # An acknowledged write lost, a failed attempt's value, a torn batch.
    for bad in ({"w-b/b0": 1, "w-b/b1": 1},
                {"w-a/r0": 2, "w-b/b0": 1, "w-b/b1": 1},
                {"w-a/r0": 1, "w-b/b0": 1, "w-b/b1": 2}):
        assert check_history(hist, {"fe1": bad}), bad
    # A read older than a write acknowledged before it began.
    stale = hist + [w("w-a", ["r0"], 4, "ok", 6),
                    {"op": "read", "pk": "w-a", "rows": ["r0"], "v": 3,
                     "outcome": "ok", "t0": 7, "t1": 7.1, "fe": "fe2"}]
    assert any("read of w-a/r0" in p for p in check_history(
        stale, {"fe1": {"w-a/r0": 4, "w-b/b0": 1, "w-b/b1": 1}}))
