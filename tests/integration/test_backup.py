"""tools/rt-backup against a real cluster: a table backed up and restored
(into a new table, and over a dropped one) comes back with the same keys,
the same EDM types and the same values, read through the official SDK.

Covers every EDM type (String, Int32, Int64 beyond 2^53, Double including
NaN/Infinity and -0.0, Boolean, DateTime with 7 fractional digits, Guid,
Binary with every byte value), unicode and escaped keys, paging (more than
1,000 entities: continuation tokens), transactions split at 100 entities of
one PartitionKey, --mode create refusing an existing entity, and a backup
that no longer matches its manifest refused before anything is written.
"""

import datetime
import importlib.machinery
import importlib.util
import json
import math
import os
import signal
import subprocess
import sys
import uuid

import pytest

from rtcluster import REPO_ROOT, Cluster

TOOL = os.path.join(REPO_ROOT, "tools", "rt-backup", "rt-backup")


def _tool_module():
    loader = importlib.machinery.SourceFileLoader("rt_backup", TOOL)
    spec = importlib.util.spec_from_loader("rt_backup", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with Cluster(str(tmp_path_factory.mktemp("backup"))) as c:
        yield c
        c.check_sanitizers()


def _run(c, *args, check=True):
    env = dict(os.environ, RT_CONNECTION_STRING=c.connection_string)
    r = subprocess.run([sys.executable, TOOL] + list(args), env=env,
                       capture_output=True, text=True, timeout=300)
    if check:
        assert r.returncode == 0, r.stdout + r.stderr
    return r


def _entities():
    from azure.data.tables import EdmType, EntityProperty
    odd = [
        # Unicode and characters that are legal in keys but awkward.
        ("pk-ü€😀", "rk-日本語"),
        ("pk with space", "rk'quote\"dq"),
        ("pk%25pct", "rk+plus&amp=eq"),
    ]
    out = []
    for i, (pk, rk) in enumerate(odd):
        out.append({
            "PartitionKey": pk, "RowKey": rk,
            "S": "text ✓ \u0001 %d" % i,
            "I32": -2147483648 + i,
            "I64": EntityProperty(2 ** 53 + 1 + i, EdmType.INT64),
            "I64neg": EntityProperty(-(2 ** 63) + i, EdmType.INT64),
            "D": 0.1 + i,
            "Dneg0": -0.0,
            "Dnan": float("nan"),
            "Dinf": float("inf"),
            "B": i % 2 == 0,
            "T": EntityProperty("2024-02-29T23:59:59.1234567Z",
                                EdmType.DATETIME),
            "G": uuid.UUID(int=0x0123456789abcdef0123456789abcdef + i),
            "Bin": bytes(range(256)),
            "Empty": "",
        })
    # Paging and batching: 1,250 entities in 3 partitions (one of 1,100:
    # eleven transactions of 100).
    for n in range(1250):
        pk = "big" if n < 1100 else "p%d" % (n % 2)
        out.append({"PartitionKey": pk, "RowKey": "%05d" % n, "n": n,
                    "when": datetime.datetime(2020, 1, 1, 0, 0, n % 60,
                                              n * 7 % 1000000,
                                              tzinfo=datetime.timezone.utc)})
    return out


def _load(tc, ents):
    by_pk = {}
    for e in ents:
        by_pk.setdefault(e["PartitionKey"], []).append(e)
    for pk, es in by_pk.items():
        for i in range(0, len(es), 100):
            tc.submit_transaction([("create", e) for e in es[i:i + 100]])


def _snapshot(mod, tc):
    """Every entity as rt-backup encodes it (types and wire values)."""
    return [mod.encode_entity(e) for e in tc.list_entities()]


def test_table_round_trip(cluster, tmp_path):
    """Backup, restore under another name, and restore after a drop: the
    same entities, types and values."""
    mod = _tool_module()
    svc = cluster.table_service_client()
    svc.create_table("orig")
    src = svc.get_table_client("orig")
    _load(src, _entities())
    before = _snapshot(mod, src)
    assert len(before) == 1253

    d = str(tmp_path / "bk")
    r = _run(cluster, "backup", "orig", d)
    assert "1253 entities" in r.stdout
    manifest = json.load(open(os.path.join(d, "orig.manifest.json")))
    assert manifest["entities"] == 1253

    # The file itself keeps the exact wire forms.
    first = {}
    for line in open(os.path.join(d, "orig.jsonl"), encoding="utf-8"):
        o = json.loads(line)
        if o["RowKey"] == "rk-日本語":
            first = o
    assert first["p"]["I64"] == ["Edm.Int64", str(2 ** 53 + 1)]
    assert first["p"]["T"] == ["Edm.DateTime", "2024-02-29T23:59:59.1234567Z"]
    assert first["p"]["Dnan"] == ["Edm.Double", "NaN"]
    assert first["p"]["Dinf"] == ["Edm.Double", "Infinity"]
    assert first["p"]["I32"] == ["Edm.Int32", -2147483648]

    r = _run(cluster, "restore", "--as", "copy", "orig", d)
    assert "1253 entities restored into copy" in r.stdout
    after = _snapshot(mod, svc.get_table_client("copy"))
    assert after == before

    # Values as the SDK reads them, independently of the encoding.
    e = svc.get_table_client("copy").get_entity("pk-ü€😀", "rk-日本語")
    assert e["I64"].value == 2 ** 53 + 1
    assert e["Bin"] == bytes(range(256))
    assert e["G"] == uuid.UUID(int=0x0123456789abcdef0123456789abcdef)
    assert math.isnan(e["Dnan"]) and e["Dinf"] == float("inf")
    assert math.copysign(1.0, e["Dneg0"]) == -1.0
    assert e["B"] is True and e["S"] == "text ✓ \u0001 0"
    assert e["T"].tables_service_value == "2024-02-29T23:59:59.1234567Z"

    # A dropped table comes back under its own name.
    svc.delete_table("orig")
    # The name is held for --delete-grace-ms after a delete (409
    # TableBeingDeleted): the tool waits it out.
    r = _run(cluster, "restore", "orig", d, check=False)
    assert r.returncode == 0, r.stderr
    assert _snapshot(mod, svc.get_table_client("orig")) == before


def test_restore_create_refuses_existing(cluster, tmp_path):
    """--mode create does not overwrite (the transaction is refused, exit
    1); --mode upsert replaces."""
    svc = cluster.table_service_client()
    svc.create_table("small")
    tc = svc.get_table_client("small")
    tc.create_entity({"PartitionKey": "a", "RowKey": "1", "v": 1})
    d = str(tmp_path / "bk")
    _run(cluster, "backup", "small", d)
    tc.update_entity({"PartitionKey": "a", "RowKey": "1", "v": 2},
                     mode="replace")
    r = _run(cluster, "restore", "small", d, check=False)
    assert r.returncode == 1
    assert tc.get_entity("a", "1")["v"] == 2
    _run(cluster, "restore", "--mode", "upsert", "small", d)
    assert tc.get_entity("a", "1")["v"] == 1


def test_tampered_backup_refused(cluster, tmp_path):
    """A .jsonl that does not match its manifest is refused (exit 2) and
    nothing is written."""
    svc = cluster.table_service_client()
    svc.create_table("tamper")
    svc.get_table_client("tamper").create_entity(
        {"PartitionKey": "a", "RowKey": "1", "v": 1})
    d = str(tmp_path / "bk")
    _run(cluster, "backup", "tamper", d)
    p = os.path.join(d, "tamper.jsonl")
    text = open(p).read().replace('"v":["Edm.Int32",1]',
                                  '"v":["Edm.Int32",7]')
    open(p, "w").write(text)
    r = _run(cluster, "restore", "--as", "tamper2", "tamper", d, check=False)
    assert r.returncode == 2 and "manifest" in r.stderr
    names = {t.name for t in svc.list_tables()}
    assert "tamper2" not in names


def test_backup_all_tables(cluster, tmp_path):
    """--all backs up every table of the account and restores every table
    of a directory."""
    svc = cluster.table_service_client()
    svc.create_table("allone")
    svc.get_table_client("allone").create_entity(
        {"PartitionKey": "x", "RowKey": "y", "z": True})
    d = str(tmp_path / "all")
    _run(cluster, "backup", "--all", d)
    names = {t.name for t in svc.list_tables()}
    have = {f[:-len(".manifest.json")] for f in os.listdir(d)
            if f.endswith(".manifest.json")}
    assert have == names


def test_whole_cluster_files(tmp_path):
    """docs/DEPLOY.md §10, whole cluster: mdb_copy of every running
    partition server, the master's directory copied while it is stopped
    briefly; after more writes, everything stopped, the files put back and
    started: exactly the data of the backup, RF 3 copies in sync."""
    import shutil
    import time
    if shutil.which("mdb_copy") is None:
        pytest.skip("mdb_copy not installed (Debian lmdb-utils)")
    with Cluster(str(tmp_path / "c")) as c:
        svc = c.table_service_client()
        svc.create_table("whole")
        tc = svc.get_table_client("whole")
        _load(tc, [{"PartitionKey": "p%d" % (i % 3), "RowKey": "%04d" % i,
                    "v": i} for i in range(300)])
        bk = tmp_path / "bk"
        t0 = time.monotonic()
        for p in c.pss:
            (bk / p.name).mkdir(parents=True)
            subprocess.run(["mdb_copy", os.path.join(c.workdir, p.name),
                            str(bk / p.name)], check=True)
        t_ps = time.monotonic() - t0
        m = c.masters[0]
        c.kill(m.name, signal.SIGTERM)
        m.reap()
        shutil.copytree(os.path.join(c.workdir, m.name), str(bk / m.name))
        c.start_process(m.name)
        t_all = time.monotonic() - t0
        print("whole-cluster backup: partition servers %.2fs, all %.2fs"
              % (t_ps, t_all))
        tc.create_entity({"PartitionKey": "after", "RowKey": "x", "v": 1})
        tc.delete_entity("p0", "0000")

        c.stop()
        for p in c.pss:
            d = os.path.join(c.workdir, p.name)
            for f in os.listdir(d):
                if f.endswith(".mdb"):
                    os.unlink(os.path.join(d, f))
            shutil.copy(str(bk / p.name / "data.mdb"), d)
        shutil.rmtree(os.path.join(c.workdir, m.name))
        shutil.copytree(str(bk / m.name), os.path.join(c.workdir, m.name))
        c.start()
        rows = {(e["PartitionKey"], e["RowKey"]): e["v"]
                for e in c.table_service_client().get_table_client(
                    "whole").list_entities()}
        assert rows == {("p%d" % (i % 3), "%04d" % i): i for i in range(300)}
        # Every range back with all its copies in sync.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            st = c.master_status()
            if st.get("replication", {}).get("under_replicated", 1) == 0:
                break
            time.sleep(0.5)
        assert st["replication"]["under_replicated"] == 0, st
        c.check_sanitizers()
