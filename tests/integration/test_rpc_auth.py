"""Cluster RPC authentication (docs/SECURITY.md): on a cluster started by
rtcluster (mutual TLS, one CA per cluster), raw clients try what an
attacker on the network would.

- No credentials (plain TCP): a well-formed DELETE_TABLE to the master, an
  ENTITY_GET and an ENTITY_WRITE to the primary partition server: each
  connection is closed with no reply, and the table and the entity are
  unchanged (checked through the SDK).
- The same over TLS with a certificate of another CA: refused alike.
- A front end's certificate of the cluster (a member, the wrong role)
  calling the partition server's master-only ASSIGN_RANGES and the
  master's PS_REGISTER: answered RT_EPERM; its ENTITY_GET (its role's
  method) is served, so the refusals are not a broken client.
- A partition server's certificate of the cluster under another name
  registering with a live server's id and another address: RT_EPERM; the
  master keeps the address and the front end still reads the right data.
- The master and the partition server count and log what they refused.
About 10 s.
"""

import json
import os
import subprocess
import time
import urllib.request

import pytest

import rtrpc
from rtcluster import started
from rtrpc import field_bytes, field_u64

# proto/rt.proto Method
PS_REGISTER = 1
PS_HEARTBEAT = 2
DELETE_TABLE = 13
ASSIGN_RANGES = 21
ENTITY_WRITE = 30
ENTITY_GET = 31
OP_UPSERT_REPLACE = 5
RT_EPERM = -10029  # common/rt_err.h: 403 AuthorizationPermissionMismatch


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from started(tmp_path_factory, "rpcauth", n_ps=3,
                       replication_factor=3)


@pytest.fixture(scope="module")
def table(cluster):
    svc = cluster.table_service_client()
    t = svc.create_table("authz")
    t.create_entity({"PartitionKey": "p", "RowKey": "r", "v": "original"})
    return t


def _rtctl_init(cluster, d):
    subprocess.run([cluster.bins["rtctl"], "cluster", "init", d,
                    "--masters", "master", "--partition-servers", "ps1",
                    "--frontends", "frontend"], check=True,
                   stdout=subprocess.DEVNULL, timeout=60)
    return d


def _status(cluster):
    return json.loads(cluster.rtctl("status", "--json").stdout)


def _route(cluster):
    """(primary's address, server id, RangeRef body) of table authz."""
    st = _status(cluster)
    rng = [r for r in st["ranges"] if r["table"] == "authz"][0]
    srv = [s for s in st["servers"] if s["id"] == rng["server"]][0]
    ref = (field_u64(1, rng.get("table_id", 0) or 0) +
           field_u64(2, rng["id"]) + field_u64(3, rng["epoch"]))
    return srv["addr"], srv["id"], ref


def _frames(cluster):
    addr, _sid, ref = _route(cluster)
    delete = field_bytes(1, "devstoreaccount1") + field_bytes(2, "authz")
    get = field_bytes(1, ref) + field_bytes(2, "p") + field_bytes(3, "r")
    op = (field_u64(1, OP_UPSERT_REPLACE) + field_bytes(2, "p") +
          field_bytes(3, "r") + field_bytes(4, b""))
    write = field_bytes(1, ref) + field_bytes(2, op)
    return [(cluster.master_rpc_addr, DELETE_TABLE, delete),
            (addr, ENTITY_GET, get), (addr, ENTITY_WRITE, write)]


def _unchanged(cluster, table):
    svc = cluster.table_service_client()
    assert "authz" in [t.name for t in svc.list_tables()]
    assert table.get_entity("p", "r")["v"] == "original"


def _log_has(proc, text):
    for path in proc.stderr_paths:
        with open(path, errors="replace") as f:
            if text in f.read():
                return True
    return False


def _master_metric(cluster, name):
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    url = "http://%s/metrics" % cluster.master_http_addr
    with opener.open(url, timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return None


def test_no_credentials_closed(cluster, table):
    """Plain TCP: every frame's connection is closed, nothing answered,
    nothing changed; the master counts and logs it."""
    for addr, method, body in _frames(cluster):
        assert rtrpc.call(addr, method, body) is None, (addr, method)
    _unchanged(cluster, table)
    assert _log_has(cluster.master, "TLS: refused connection from")
    deadline = time.monotonic() + 10
    while (_master_metric(cluster, "rt_rpc_tls_refused_total") or 0) < 1:
        assert time.monotonic() < deadline, "no rt_rpc_tls_refused_total"
        time.sleep(0.2)


def test_foreign_ca_closed(cluster, table, tmp_path):
    """A certificate of another CA (with a member's very name) is refused
    at the handshake; no frame is read."""
    d = _rtctl_init(cluster, str(tmp_path / "foreign"))
    for addr, method, body in _frames(cluster):
        for name in ("frontend", "master", "ps1"):
            r = rtrpc.call(addr, method, body,
                           tls_dir=os.path.join(d, name))
            assert r is None, (addr, method, name, r)
    _unchanged(cluster, table)


def test_no_client_certificate_closed(cluster, table):
    """TLS without a client certificate: refused alike."""
    for addr, method, body in _frames(cluster):
        assert rtrpc.call(addr, method, body, tls=True) is None
    _unchanged(cluster, table)


def test_wrong_role_refused(cluster, table):
    """A front end's certificate may read entities, not assign ranges nor
    register as a partition server."""
    fe = cluster.tls_node("authz-fe", "frontend")
    addr, sid, _ref = _route(cluster)
    frames = _frames(cluster)
    status, body = rtrpc.call(addr, ENTITY_GET, frames[1][2], tls_dir=fe)
    assert status == 0 and b"original" in body
    r = rtrpc.call(addr, ASSIGN_RANGES, b"", tls_dir=fe)
    assert r is not None and r[0] == RT_EPERM, r
    assert b"fe:authz-fe may not call ASSIGN_RANGES" in r[1]
    reg = field_u64(1, sid) + field_bytes(2, "127.0.0.1:1")
    r = rtrpc.call(cluster.master_rpc_addr, PS_REGISTER, reg, tls_dir=fe)
    assert r is not None and r[0] == RT_EPERM, r
    _unchanged(cluster, table)
    ps_proc = [p for p in cluster.pss
               if cluster.ps_addr(p) == addr][0]
    assert _log_has(ps_proc, "refused a request from")


def test_impostor_registration_refused(cluster, table):
    """A partition server certificate of the cluster, but not the one the
    id was registered with, cannot take a live server's id: the master
    refuses it and keeps the address it pushes to the front end."""
    rogue = cluster.tls_node("impostor", "ps")
    addr, sid, _ref = _route(cluster)
    reg = field_u64(1, sid) + field_bytes(2, "127.0.0.1:9")
    r = rtrpc.call(cluster.master_rpc_addr, PS_REGISTER, reg,
                   tls_dir=rogue)
    assert r is not None and r[0] == RT_EPERM, r
    assert b"belongs to ps:" in r[1], r[1]
    hb = field_u64(1, sid)
    r = rtrpc.call(cluster.master_rpc_addr, PS_HEARTBEAT, hb, tls_dir=rogue)
    assert r is not None and r[0] == RT_EPERM, r
    servers = {s["id"]: s for s in _status(cluster)["servers"]}
    assert servers[sid]["addr"] == addr
    assert servers[sid]["state"].startswith("up")
    _unchanged(cluster, table)
    table.upsert_entity({"PartitionKey": "p", "RowKey": "r2", "v": "after"})
    assert table.get_entity("p", "r2")["v"] == "after"
    assert _log_has(cluster.master, "belongs to certificate ps:")
