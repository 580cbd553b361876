"""The masters' Raft traffic over mutual TLS (master/ms_rtls.h): three
rt-master processes started with --cluster-tls, each with its own
`master:mN` certificate of one test CA (made here with python3-cryptography,
which python3-azure depends on).

  - the group elects a leader, commits (tables created through the SDK are
    in the leader's catalog), and after kill -9 of the leader the other two
    elect a new one that commits; the killed master comes back as a
    follower;
  - on every master's raft port, a raw TCP client sending a forged raft
    handshake and message, a TLS client without a certificate, with a
    `ps:` certificate of the cluster CA, or with a `master:` certificate of
    another CA, is closed; the leader and its term do not change, the
    refusals are logged at warn with the client's address, and tables can
    still be created;
  - every socket a master holds is CLOEXEC, and after `rtctl master
    transfer` the old leader re-executes itself (same pid) and rejoins
    over TLS.

About 20 s.
"""

import os
import signal
import socket
import ssl
import struct
import time
import urllib.request

import pytest
from rtcluster import Cluster
from rtpki import make_ca, issue, masters_over_tls


@pytest.fixture
def cluster(tmp_path_factory):
    work = tmp_path_factory.mktemp("rafttls")
    pki = os.path.join(str(work), "pki")
    c = Cluster(work, n_ps=1, replication_factor=1, masters=3)
    ca = masters_over_tls(c, pki)
    c.pki = {
        # A partition server's certificate of the masters' own CA.
        "ps": c.tls_node("rogue", "ps") if ca is None else
        issue(ca, "ps:rogue", os.path.join(pki, "rogue")),
        "foreign": issue(make_ca("another CA"), "master:m1",
                         os.path.join(pki, "foreign")),
    }
    c.start()
    yield c
    c.stop(check=False)
    c.check_exits()
    c.check_sanitizers()


# ------------------------------------------------------------ helpers
def leader_term(cluster):
    """(raft address, term) of the leader as the leader reports it."""
    st = cluster.master_status()
    for m in st.get("masters", []):
        if m.get("leader"):
            return m["raft_addr"], m["term"]
    raise AssertionError("no leader in %r" % st.get("masters"))


def _raft_hello():
    # raft_uv_tcp's handshake (protocol 1, id 7, a 16-byte address) and
    # then bytes that libraft would parse as a message header.
    addr = b"127.0.0.1:9".ljust(16, b"\0")
    return struct.pack("<QQQ", 1, 7, len(addr)) + addr + b"\xab" * 64


def _closed(sock):
    """True when the server closes @sock (EOF, reset or a TLS alert)
    within 8 s; False when it is still open then."""
    sock.settimeout(8)
    try:
        while True:
            if not sock.recv(4096):
                return True
    except socket.timeout:
        return False
    except (ConnectionError, ssl.SSLError, OSError):
        return True


def probe_plain(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        s.sendall(_raft_hello())
        return _closed(s)
    finally:
        s.close()


def probe_tls(port, creds):
    """A TLS client presenting @creds (a directory, or None for no
    certificate) that trusts any server, so a refusal is the server's."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if creds is not None:
        ctx.load_cert_chain(os.path.join(creds, "node.crt"),
                            os.path.join(creds, "node.key"))
    raw = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        try:
            s = ctx.wrap_socket(raw)
        except (ssl.SSLError, ConnectionError, OSError):
            return True  # refused during the handshake
        try:
            s.sendall(_raft_hello())
        except (ssl.SSLError, ConnectionError, OSError):
            return True
        return _closed(s)
    finally:
        raw.close()


def master_log(cluster, m):
    """Every generation's stderr of master @m."""
    out = ""
    for path in m.stderr_paths:
        with open(path, errors="replace") as f:
            out += f.read()
    return out


# ------------------------------------------------------------ tests
def test_tls_group_elects_commits_and_survives_leader_kill(cluster):
    svc = cluster.table_service_client()
    leader, _ = cluster.wait_master_leader()
    for m in cluster.masters:
        assert "(mutual TLS)" in master_log(cluster, m), m.name
    svc.create_table("tlsfirst")
    t_kill = time.monotonic()
    cluster.kill(leader.name, signal.SIGKILL)
    new, took = cluster.wait_master_leader(exclude=leader)
    print("new leader %s %.2f s after kill -9 of %s (raft over TLS)"
          % (new.name, took, leader.name))
    assert took < 10.0
    svc.create_table("tlssecond")
    names = {x.name for x in svc.list_tables()}
    assert {"tlsfirst", "tlssecond"} <= names
    # The killed master rejoins over TLS as a follower.
    cluster.start_process(leader.name)
    deadline = time.monotonic() + 15
    while True:
        st = cluster.master_status()
        ms = st.get("masters", [])
        if len(ms) == 3 and all("term" in m for m in ms) and \
                sum(1 for m in ms if m["leader"]) == 1:
            break
        assert time.monotonic() < deadline, ms
        time.sleep(0.2)
    assert cluster.master_leader() is not leader
    print("control plane back %.2f s after the kill" %
          (time.monotonic() - t_kill))


def test_raft_ports_refuse_everything_but_masters(cluster):
    svc = cluster.table_service_client()
    leader, _ = cluster.wait_master_leader()
    svc.create_table("tlsbefore")
    before = leader_term(cluster)
    for m in cluster.masters:
        port = m.ports["raft"]
        assert probe_plain(port), "%s: plain TCP kept open" % m.name
        assert probe_tls(port, None), "%s: TLS without cert" % m.name
        assert probe_tls(port, cluster.pki["ps"]), "%s: ps: cert" % m.name
        assert probe_tls(port, cluster.pki["foreign"]), \
            "%s: another CA's master: cert" % m.name
    # Nobody's vote or log was touched: same leader, same term, and the
    # group still commits.
    assert leader_term(cluster) == before
    assert cluster.master_leader() is leader
    svc.create_table("tlsafter")
    assert {"tlsbefore", "tlsafter"} <= {x.name for x in svc.list_tables()}
    for m in cluster.masters:
        log = master_log(cluster, m)
        assert "refused raft connection from 127.0.0.1:" in log, m.name
        assert "certificate ps:rogue is not a master's" in log, m.name
    # ... and counted in each member's own metrics (published every
    # second), next to the accepted connections of its peers.
    deadline = time.monotonic() + 5
    for m in cluster.masters:
        while True:
            met = _metrics(m)
            refused = met.get('rt_master_raft_conns_total{dir="in",'
                              'result="refused"}', 0)
            if refused >= 4:
                break
            assert time.monotonic() < deadline, (m.name, met)
            time.sleep(0.2)
        assert met['rt_master_raft_conns_total{dir="in",'
                   'result="accepted"}'] >= 1, (m.name, met)


def _metrics(m):
    """A master's own /metrics (never redirected), as {series: value}."""
    url = "http://127.0.0.1:%d/metrics" % m.ports["http"]
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(
            url, timeout=5) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("rt_master_raft_conns_total"):
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out


def _sockets_without_cloexec(pid):
    """The socket fds of process @pid that an execv would leak."""
    bad = []
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            with open("/proc/%d/fdinfo/%s" % (pid, fd)) as f:
                info = f.read()
        except OSError:
            continue  # closed meanwhile
        flags = int(info.split("flags:")[1].split()[0], 8)
        if target.startswith("socket:") and not flags & 0o2000000:
            bad.append((fd, target))
    return bad


def test_transfer_reexecutes_the_old_leader_over_tls(cluster):
    svc = cluster.table_service_client()
    svc.create_table("tlsxfer")
    old, _ = cluster.wait_master_leader()
    # Every socket the masters hold (raft over TLS included) is CLOEXEC,
    # so the re-executing leader carries none into its next life.
    for m in cluster.masters:
        assert _sockets_without_cloexec(m.pid) == [], m.name
    pid = old.pid
    r = cluster.rtctl("master", "transfer")
    assert r.returncode == 0, r.stderr
    deadline = time.monotonic() + 15
    while True:
        new = cluster.master_leader()
        if new is not None and new is not old:
            break
        assert time.monotonic() < deadline, "the leadership did not move"
        time.sleep(0.1)
    # The old leader re-executes itself (same pid) and rejoins over TLS.
    deadline = time.monotonic() + 15
    while master_log(cluster, old).count("(mutual TLS)") < 2:
        assert time.monotonic() < deadline, "no re-execution over TLS"
        time.sleep(0.1)
    assert old.pid == pid
    while True:
        ms = cluster.master_status().get("masters", [])
        if len(ms) == 3 and all("term" in m for m in ms):
            break
        assert time.monotonic() < deadline, ms
        time.sleep(0.2)
    svc.create_table("tlsxfer2")
