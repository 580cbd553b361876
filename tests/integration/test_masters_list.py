"""Clients of several masters (docs/DESIGN-master-ha.md §5.1-§5.2): a
partition server and a front end started with `--master FOLLOWER,LEADER`
end at the leader. FOLLOWER is a fake master written here: it speaks the
RPC framing (proto/README.md) and answers every request RT_ENOTLEADER with
an rt.NotLeader naming the real master's RPC address. The cluster RPC is
mutual TLS, so the fake shows a master certificate of the cluster's CA.
"""

import socketserver
import ssl
import struct
import threading
import time

import pytest

from rtcluster import Cluster

RT_ENOTLEADER = -10114
HDR = struct.Struct(">IHBBIiQ")  # len, magic, version, flags, method, status, id


class FakeFollower:
    """A master that is not the leader, on a loopback port."""

    def __init__(self, leader_rpc_addr, tls_dir=None):
        fake = self
        ctx = None
        if tls_dir is not None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.minimum_version = ssl.TLSVersion.TLSv1_3
            ctx.load_cert_chain(tls_dir + "/node.crt", tls_dir + "/node.key")
            ctx.load_verify_locations(tls_dir + "/ca.crt")
            ctx.verify_mode = ssl.CERT_REQUIRED
        self.requests = 0
        addr = leader_rpc_addr.encode()
        # rt.NotLeader{leader_rpc_addr = 2}: tag 0x12, length, bytes.
        body = b"\x12" + bytes([len(addr)]) + addr

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                if ctx is not None:
                    try:
                        self.request = ctx.wrap_socket(self.request,
                                                       server_side=True)
                    except (OSError, ssl.SSLError):
                        return
                buf = b""
                while True:
                    try:
                        data = self.request.recv(65536)
                    except OSError:
                        return
                    if not data:
                        return
                    buf += data
                    while len(buf) >= HDR.size:
                        n, _, _, flags, method, _, rid = HDR.unpack_from(buf)
                        if len(buf) < HDR.size + n:
                            break
                        buf = buf[HDR.size + n:]
                        if flags & 1 or rid == 0:
                            continue  # a reply or a one-way call
                        fake.requests += 1
                        self.request.sendall(HDR.pack(
                            len(body), 0x5254, 1, 1, method, RT_ENOTLEADER,
                            rid) + body)

        socketserver.ThreadingTCPServer.allow_reuse_address = True
        self.srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.srv.daemon_threads = True
        self.addr = "127.0.0.1:%d" % self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("cluster"), n_ps=2,
                replication_factor=1)
    c.start()
    yield c
    c.stop(check=False)
    c.check_sanitizers()


@pytest.fixture(scope="module")
def follower(cluster):
    f = FakeFollower(cluster.master_rpc_addr,
                     cluster.tls_node("fakefollower", "master")
                     if cluster.cluster_tls else None)
    yield f
    f.close()


def _stderr(proc):
    with open(proc.stderr_path, errors="replace") as f:
        return f.read()


def test_ps_registers_at_leader(cluster, follower):
    """A partition server restarted with --master FOLLOWER,LEADER asks the
    follower, is told RT_ENOTLEADER, and registers at the leader."""
    before = follower.requests
    cluster.ps_master["ps1"] = "%s,%s" % (follower.addr,
                                          cluster.master_rpc_addr)
    cluster.start_process("ps1")
    want = "registered with master %s" % cluster.master_rpc_addr
    deadline = time.monotonic() + 15
    while want not in _stderr(cluster.proc("ps1")):
        assert time.monotonic() < deadline, _stderr(cluster.proc("ps1"))
        time.sleep(0.1)
    assert follower.requests > before


def test_fe_subscribes_at_leader(cluster, follower):
    """A front end restarted with --master FOLLOWER,LEADER gets its map
    from the leader and serves table operations."""
    before = follower.requests
    cluster.fe_master = "%s,%s" % (follower.addr, cluster.master_rpc_addr)
    cluster.start_process("frontend")
    svc = cluster.table_service_client()
    deadline = time.monotonic() + 15
    while True:
        try:
            tc = svc.create_table("masterslist")
            break
        except Exception:  # noqa: BLE001 - 503 until the map is there
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    tc.create_entity({"PartitionKey": "p", "RowKey": "r", "v": 1})
    assert tc.get_entity("p", "r")["v"] == 1
    assert follower.requests > before


def test_clean_shutdown(cluster):
    """Both follow-the-leader clients stop cleanly (status 0)."""
    cluster.stop()
    cluster.check_sanitizers()
