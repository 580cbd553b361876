"""Key order in UTF-16 code units, as Azure sorts PartitionKey and RowKey
(docs/DESIGN.md §3, "Key encoding"), through the official Python SDK against
real processes.

UTF-16 ordinal order and UTF-8 byte order differ between the supplementary
characters (U+10000.., surrogates 0xD800.. in UTF-16) and U+E000..U+FFFF:
UTF-16 puts the supplementary ones first. Every key here mixes ASCII, the
U+E000..U+FFFF block and supplementary characters, and the expected order
is computed independently with Python's UTF-16 encoder (big-endian bytes
compare as code units). Covered: list order, $filter ranges (keys and a
String property) across the two groups, continuation with one entity per
page, and a table split (rtctl split) at such keys into three ranges on two
servers: point reads, writes, lists, filters and continuation routed to the
right range and in the right order across the bounds. One split is only
valid in UTF-16 order (at U+1F600 inside ["", U+E000)), so the master's
range checks are tested too. Last, the partition servers' data directories
are turned back into key format 1 (tests/lib/th_keyfmt1.c, what an older
release wrote) while they are stopped: rt-inspect refuses them, and the
servers migrate them at start and serve every key in order again.

One cluster for the module: two partition servers at replication factor 1,
policy "none" (only rtctl reshapes the map).
"""

import json
import os
import signal
import subprocess
import time

import pytest

from rtcluster import ClusterError, started

# Mixed on purpose; each string is a valid key (no / \\ # ? or controls).
KEYS = [
    "a", "A", "z", "~", "\u00e9", "\u4e2d", "\ud7ff",
    "\ue000", "\ue001", "\uefff", "\uf000", "\uf8ff", "\uff01", "\ufffd",
    "\U00010000", "\U0001F600", "\U0001F601", "\U0010FFFD",
    "a\U0001F600", "a\uff01", "a\ue000b", "\uff01\U0001F600",
    "\U0001F600\uff01", "\U0001F600a",
]


def u16(s):
    """Sort key: UTF-16 code units (big-endian bytes compare the same)."""
    return s.encode("utf-16-be")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from started(tmp_path_factory, "keyorder", n_ps=2,
                       replication_factor=1,
                       extra_args={"master": ["--policy", "none"]})


@pytest.fixture(scope="module")
def svc(cluster):
    return cluster.table_service_client()


_seq = iter(range(10000))


def fresh(svc):
    t = svc.create_table("ko%05d" % next(_seq))
    for k in KEYS:
        t.create_entity({"PartitionKey": k, "RowKey": k, "S": k})
        t.create_entity({"PartitionKey": "same", "RowKey": k, "S": k})
    return t


def keys_of(ents):
    return [(e["PartitionKey"], e["RowKey"]) for e in ents]


def all_sorted():
    pairs = [(k, k) for k in KEYS] + [("same", k) for k in KEYS]
    return sorted(pairs, key=lambda p: (u16(p[0]), u16(p[1])))


def check_table(t):
    """Everything a reader sees of a table made by fresh()."""
    want = all_sorted()
    # List order.
    assert keys_of(t.list_entities()) == want
    # One entity per page: the continuation tokens walk the same order.
    pages = [keys_of(page)
             for page in t.list_entities(results_per_page=1).by_page()]
    assert [p for page in pages for p in page] == want
    assert all(len(page) <= 1 for page in pages)
    # Point reads.
    for pk, rk in want:
        e = t.get_entity(pk, rk)
        assert (e["PartitionKey"], e["RowKey"], e["S"]) == (pk, rk, rk)
    # $filter ranges across the two groups, on PK, RK and a String
    # property, with and without a page size.
    lo, hi = "\U00010000", "\ue000"
    supp = [p for p in want if u16(lo) <= u16(p[0]) < u16(hi)]
    assert supp and all(ord(p[0][0]) >= 0x10000 for p in supp)
    q = "PartitionKey ge @lo and PartitionKey lt @hi"
    assert keys_of(t.query_entities(q, parameters={"lo": lo,
                                                   "hi": hi})) == supp
    got = [p for page in t.query_entities(q, parameters={"lo": lo, "hi": hi},
                                          results_per_page=1).by_page()
           for p in keys_of(page)]
    assert got == supp
    # The empty way round: U+E000 < U+10000 is false in UTF-16.
    assert list(t.query_entities(q, parameters={"lo": hi, "hi": lo})) == []
    q = "PartitionKey eq 'same' and RowKey ge @lo"
    assert keys_of(t.query_entities(q, parameters={"lo": "\uff01"})) == [
        p for p in want if p[0] == "same" and u16(p[1]) >= u16("\uff01")]
    q = "S gt @a and S le @b"
    a, b = "\U0001F600", "\uff01"
    assert keys_of(t.query_entities(q, parameters={"a": a, "b": b})) == [
        p for p in want if u16(a) < u16(p[1]) <= u16(b)]


def test_order_filters_and_continuation(svc):
    """One range: list, pages of one, point reads and filters follow UTF-16
    order (an emoji before U+E000..U+FFFF)."""
    check_table(fresh(svc))


def rtctl_json(cluster, *args):
    r = cluster.rtctl(*args, "--json", check=False, timeout=120)
    body = json.loads(r.stdout) if r.stdout.strip() else {}
    if r.returncode != 0:
        raise ClusterError("rtctl %s -> %d\n%s\n%s" % (
            " ".join(args), r.returncode, r.stdout, r.stderr))
    return body


def ranges_of(cluster, name):
    st = cluster.master_status()
    return sorted([r for r in st["ranges"] if r["table"] == name],
                  key=lambda r: u16(r["low"]))


def test_split_at_high_bmp_and_supplementary_keys(cluster, svc):
    """A table split at U+E000, then its left half at U+1F600 (inside
    ["", U+E000) only in UTF-16 order), then the middle range moved to the
    other server: reads, filters and continuation cross the three ranges
    in UTF-16 order; writes after the splits land in the right range."""
    t = fresh(svc)
    name = t.table_name
    (rg,) = ranges_of(cluster, name)
    ev = rtctl_json(cluster, "split", str(rg["id"]), "\ue000")
    assert ev["outcome"] == "ok", ev
    left, right = ev["new_ranges"]
    ev = rtctl_json(cluster, "split", str(left), "\U0001F600")
    assert ev["outcome"] == "ok", ev
    # The status document is republished after the split's event: wait
    # for it to show the three ranges.
    end = time.monotonic() + 15
    rs = ranges_of(cluster, name)
    while len(rs) < 3 and time.monotonic() < end:
        time.sleep(0.1)
        rs = ranges_of(cluster, name)
    assert [r["low"] for r in rs] == ["", "\U0001F600", "\ue000"], rs
    assert rs[0]["high"] == "\U0001F600" and rs[1]["high"] == "\ue000"
    # A split key outside its range is refused: U+FF01 is not in
    # ["", U+1F600) in UTF-16 order (it was in UTF-8 byte order's view).
    r = cluster.rtctl("split", str(rs[0]["id"]), "\uff01", "--json",
                      check=False, timeout=60)
    assert r.returncode != 0, r.stdout
    assert len(ranges_of(cluster, name)) == 3
    # The middle range on the other server, so a scan crosses servers.
    others = [s["id"] for s in cluster.master_status()["servers"]
              if s["id"] != rs[1]["server"]]
    ev = rtctl_json(cluster, "move", str(rs[1]["id"]), str(others[0]))
    assert ev["outcome"] == "ok", ev
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        rs = ranges_of(cluster, name)
        if rs[1]["server"] == others[0] and not \
                cluster.master_status().get("ops"):
            break
        time.sleep(0.2)
    assert rs[1]["server"] == others[0], rs
    assert rs[0]["server"] != rs[1]["server"]

    check_table(t)
    # New keys after the splits go to the range that holds them and read
    # back in order with the rest.
    extra = ["\U0001F5FF", "\ue000", "\U0001F600", "\uffff", "\U000E0001"]
    for k in extra:
        t.upsert_entity({"PartitionKey": k, "RowKey": "new", "S": k})
    got = keys_of(t.list_entities())
    pairs = all_sorted() + [(k, "new") for k in extra]
    want = sorted(set(pairs), key=lambda p: (u16(p[0]), u16(p[1])))
    assert got == want
    pages = [keys_of(page)
             for page in t.list_entities(results_per_page=1).by_page()]
    assert [p for page in pages for p in page] == want
    for k in extra:
        assert t.get_entity(k, "new")["S"] == k


def test_format1_directory_migrated_at_start(cluster, svc):
    """Data directories of key format 1 (keys in UTF-8 byte order, written
    by an older release) are refused by rt-inspect, migrated in place by
    the partition server at start (logged with counts), and then read back
    whole, in UTF-16 order, with their checksums valid."""
    t = fresh(svc)
    names = [p.name for p in cluster.pss]
    tool = os.path.join(cluster.build_dir, "tests", "lib", "th-keyfmt1")
    rewritten = 0
    for name in names:
        cluster.kill(name, signal.SIGTERM)
        cluster.proc(name).reap()
    for name in names:
        r = subprocess.run([tool, os.path.join(cluster.workdir, name)],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        here = int(r.stdout)
        rewritten += here
        r = cluster.inspect(name, check=False)
        if here:
            assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
            assert "key format 1" in r.stderr, r.stderr
    # Both tables' keys with U+E000..U+FFFF, in PK or RK (the split test's
    # table is still there and moves back into order too).
    assert rewritten >= len([k for k in KEYS if any(
        0xE000 <= ord(c) <= 0xFFFF for c in k)]) * 2
    for name in names:
        cluster.start_process(name)
    check_table(t)
    logs = ""
    for f in cluster.stderr_files():
        with open(f, errors="replace") as fh:
            logs += fh.read()
    assert "key format 2: rewrote" in logs
