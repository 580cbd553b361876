"""Hostile frames against the replication RPC methods (docs/DESIGN-replication.md
§4): an RF-3 cluster gets, on every partition server's and the master's RPC
port, REPL_APPEND, REPL_SUPPORT, SEAL, ISR_CHANGE, RANGE_FREEZE / RANGE_THAW
(refused off the master link) and the reserved methods
with garbage bodies, truncated protobuf, absurd field values (unknown
ranges, epochs at 2^64-1, LSN gaps, a group whose CRC does not match) and
frames claiming the maximum length then closing. Every request is
answered or its connection closed, no process dies, and afterwards the
table still holds exactly the acknowledged entities and takes writes
through the SDK. The frames come over mutual TLS with a partition
server's certificate of the cluster (rtrpc), the worst an outsider could
do being refused at the handshake (test_rpc_auth). About 10 s.
"""

import random

import pytest

import rtrpc
from rtcluster import started
from rtrpc import field_bytes, field_u64, frame, varint

REPL_METHODS = list(range(60, 67)) + list(range(70, 74)) + [76, 77]


def call(addr, method, body, tls_dir, rid=1):
    """Sends one request; returns the reply's status, or None when the
    peer closed the connection instead (also acceptable)."""
    r = rtrpc.call(addr, method, body, rid=rid, tls_dir=tls_dir)
    return None if r is None else r[0]


def hostile_bodies(rng):
    huge = (1 << 64) - 1
    group = (field_u64(1, huge) + field_u64(2, huge) + field_u64(3, 1) +
             field_u64(4, huge) + field_bytes(6, b"\x00" * 64) +
             varint((7 << 3) | 5) + b"\xde\xad\xbe\xef")
    yield b""
    yield b"\xff" * 32
    yield bytes(rng.getrandbits(8) for _ in range(200))
    yield field_bytes(2, b"\x08")                      # truncated sub-message
    yield field_u64(1, 7) + field_bytes(2, group)      # REPL_APPEND-shaped
    yield field_u64(1, 1) + field_u64(2, 1) + field_u64(3, huge)  # SEAL-shaped
    yield field_u64(1, 1) + field_u64(2, 1) + field_u64(3, 2) * 50  # ISR-ish
    yield field_bytes(4, b"x" * 100000)                # large string field


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from started(tmp_path_factory, "hostile", n_ps=3,
                       replication_factor=3)


def test_hostile_replication_frames(cluster):
    svc = cluster.table_service_client()
    t = svc.create_table("hostile")
    for i in range(20):
        t.create_entity({"PartitionKey": "p", "RowKey": "%03d" % i, "v": i})
    rng = random.Random(7)
    peer = cluster.tls_node("hostile", "ps")
    addrs = [cluster.ps_addr(p) for p in cluster.pss]
    addrs.append(cluster.master_rpc_addr)
    answered = 0
    for addr in addrs:
        for method in REPL_METHODS:
            for body in hostile_bodies(rng):
                # An error status, a closed link, or a harmless success
                # (an append with no groups, a support request answered
                # "not granted"): what counts is what follows.
                status = call(addr, method, body, peer)
                answered += status is not None
    assert answered > 0
    # A frame announcing a huge body then closing must not hurt anyone.
    for addr in addrs:
        with rtrpc.connect(addr, tls_dir=peer, timeout=5) as s:
            s.sendall(frame(60, b"abc", 9, length=(1 << 32) - 1))
    for p in cluster.procs:
        assert p.running(), "%s died" % p.name
    # No peer may set the master term (only a master's certificate carries
    # one): else the servers would refuse the real master from now on.
    for p in cluster.pss:
        for path in p.stderr_paths:
            with open(path, errors="replace") as f:
                assert "-> %d" % ((1 << 64) - 1) not in f.read(), \
                    "%s took a peer's master term" % p.name
    got = {e["RowKey"]: e["v"] for e in t.query_entities("PartitionKey eq 'p'")}
    assert got == {"%03d" % i: i for i in range(20)}
    t.create_entity({"PartitionKey": "p", "RowKey": "after", "v": 1})
    assert t.get_entity("p", "after")["v"] == 1
