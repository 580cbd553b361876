"""The checkers of check.py on hand-written histories: each known-bad
history (lost write, stale read, torn batch, non-linearizable register,
failed write that took effect) is caught, each known-good one (including
unknown outcomes either way) passes."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import check  # noqa: E402

R = "reg/r0"
INIT = {R: "v0"}


def op(kind, inv, comp, outcome="ok", **kw):
    d = {"op": kind, "invoke_ms": inv,
         "complete_ms": None if outcome == "unknown" else comp,
         "outcome": outcome}
    d.update(kw)
    return d


def w(inv, comp, value, outcome="ok", key=R, **kw):
    return op("upsert", inv, comp, outcome, key=key, value=value, **kw)


def rd(inv, comp, value, key=R):
    return op("read", inv, comp, key=key, value=value)


def cas(inv, comp, expect, value, outcome="ok", code=None, key=R):
    return op("replace", inv, comp, outcome, key=key, expect=expect,
              value=value, code=code)


def ins(inv, comp, key, value, outcome="ok", code=None):
    return op("insert", inv, comp, outcome, key=key, value=value, code=code)


def batch(inv, comp, bid, keys, outcome="ok", code=None):
    return op("batch", inv, comp, outcome, batch_id=bid, keys=keys,
              values=["%s-%d" % (bid, i) for i in range(len(keys))],
              code=code)


# ------------------------------------------------------------ lost writes
# An acknowledged insert missing at the end is a lost write.
def test_lost_insert_detected():
    h = [ins(0, 5, "p/a", "A"), ins(6, 9, "p/b", "B")]
    got = check.check_lost_writes(h, {"p/a": "A"}, {})
    assert len(got) == 1 and "p/b" in got[0] and "lost" in got[0]


# An acknowledged upsert overwritten at the end by an earlier write is lost.
def test_lost_register_write_detected():
    h = [w(0, 5, "v1"), w(10, 15, "v2")]
    got = check.check_lost_writes(h, {R: "v1"}, INIT)
    assert len(got) == 1 and "'v2'" in got[0]


# A later (or concurrent) acknowledged write may replace an earlier one.
def test_overwrite_by_later_write_is_fine():
    h = [w(0, 5, "v1"), w(10, 15, "v2"), w(12, 20, "v3")]
    assert check.check_lost_writes(h, {R: "v3"}, INIT) == []
    assert check.check_lost_writes(h, {R: "v2"}, INIT) == []


# An unknown write is allowed to be there or not.
def test_unknown_insert_either_way():
    h = [ins(0, None, "p/a", "A", outcome="unknown")]
    assert check.check_lost_writes(h, {}, {}) == []
    assert check.check_lost_writes(h, {"p/a": "A"}, {}) == []


# A definitely failed insert that is present took effect: a violation.
def test_failed_insert_present_detected():
    h = [ins(0, 5, "p/a", "A", outcome="fail", code=503)]
    got = check.check_lost_writes(h, {"p/a": "A"}, {})
    assert len(got) == 1 and "failed write took effect" in got[0]


# A value no write wrote is reported.
def test_invented_value_detected():
    h = [w(0, 5, "v1")]
    got = check.check_lost_writes(h, {R: "zz"}, INIT)
    assert len(got) == 1 and "no write wrote" in got[0]


# ------------------------------------------------------------ WGL
def lin(h):
    return check.check_linearizable(h, INIT)


# Sequential reads of each write in order are linearizable.
def test_wgl_sequential_ok():
    h = [rd(0, 1, "v0"), w(2, 3, "v1"), rd(4, 5, "v1"),
         cas(6, 7, "v1", "v2"), rd(8, 9, "v2"),
         cas(10, 11, "v1", "v3", outcome="fail", code=412), rd(12, 13, "v2")]
    assert lin(h) == []


# Concurrent write and reads may see either value, in a consistent order.
def test_wgl_concurrent_ok():
    h = [w(0, 10, "v1"), rd(1, 2, "v0"), rd(3, 4, "v1"), rd(5, 6, "v1")]
    assert lin(h) == []


# Once a read saw the new value, a later read may not see the old one.
def test_wgl_new_then_old_detected():
    h = [w(0, 10, "v1"), rd(1, 2, "v1"), rd(3, 4, "v0")]
    assert len(lin(h)) == 1


# Two cas from the same expected value cannot both succeed.
def test_wgl_double_cas_detected():
    h = [cas(0, 10, "v0", "a"), cas(1, 11, "v0", "b"), rd(12, 13, "b")]
    assert len(lin(h)) == 1


# A 412 while the register held the expected value is a violation.
def test_wgl_false_412_detected():
    h = [w(0, 1, "v1"), cas(2, 3, "v1", "v2", outcome="fail", code=412),
         rd(4, 5, "v1")]
    assert len(lin(h)) == 1


# An unknown write may take effect late (after later ops) ...
def test_wgl_unknown_takes_effect_late():
    h = [w(0, None, "v1", outcome="unknown"), rd(5, 6, "v0"),
         rd(20, 21, "v1")]
    assert lin(h) == []


# ... or never.
def test_wgl_unknown_never_takes_effect():
    h = [w(0, None, "v1", outcome="unknown"), rd(5, 6, "v0"),
         rd(20, 21, "v0")]
    assert lin(h) == []


# But not before it was invoked.
def test_wgl_unknown_not_before_invoke():
    h = [rd(0, 1, "v1"), w(5, None, "v1", outcome="unknown")]
    assert len(lin(h)) == 1


# A write that definitely failed (503) never takes effect.
def test_wgl_failed_write_never_visible():
    h = [w(0, 1, "v1", outcome="fail", code=503), rd(2, 3, "v1")]
    assert len(lin(h)) == 1


# A classic non-linearizable history: two writers, readers disagree on order.
def test_wgl_readers_disagree_detected():
    h = [w(0, 10, "a"), w(0, 10, "b"),
         rd(11, 12, "a"), rd(13, 14, "b"), rd(15, 16, "a")]
    assert len(lin(h)) == 1


# ------------------------------------------------------------ stale reads
# A read of the old value after a write was acknowledged is stale.
def test_stale_read_detected():
    h = [w(0, 5, "v1"), rd(10, 11, "v0")]
    got = check.check_stale_reads(h, INIT)
    assert len(got) == 1 and "stale" in got[0]
    assert len(lin(h)) == 1


# A read concurrent with the write may return the old value.
def test_concurrent_read_not_stale():
    h = [w(0, 5, "v1"), rd(4, 11, "v0")]
    assert check.check_stale_reads(h, INIT) == []
    assert lin(h) == []


# A read of an unknown write's value is never called stale.
def test_read_of_unknown_not_stale():
    h = [w(0, 5, "v1"), w(1, None, "v2", outcome="unknown"),
         rd(10, 11, "v2")]
    assert check.check_stale_reads(h, INIT) == []
    assert lin(h) == []


# ------------------------------------------------------------ batches
KEYS = ["b/1", "b/2", "b/3"]


# An acknowledged batch present in part is torn.
def test_torn_batch_detected():
    h = [batch(0, 5, "B1", KEYS)]
    final = {"b/1": "B1-0", "b/2": "B1-1"}
    got = check.check_batches(h, final)
    assert len(got) == 1 and "torn" in got[0]


# An unknown batch may be wholly there or wholly absent, never part.
def test_unknown_batch_all_or_nothing():
    h = [batch(0, None, "B1", KEYS, outcome="unknown")]
    full = {"b/1": "B1-0", "b/2": "B1-1", "b/3": "B1-2"}
    assert check.check_batches(h, full) == []
    assert check.check_batches(h, {}) == []
    assert len(check.check_batches(h, {"b/3": "B1-2"})) == 1


# A failed batch that is present, and an acked batch that is absent.
def test_failed_and_lost_batches_detected():
    h = [batch(0, 5, "B1", KEYS, outcome="fail", code=409),
         batch(6, 9, "B2", ["b/4", "b/5"])]
    final = {"b/1": "B1-0", "b/2": "B1-1", "b/3": "B1-2"}
    got = check.check_batches(h, final)
    assert len(got) == 2
    assert any("failed batch B1" in g for g in got)
    assert any("lost batch B2" in g for g in got)
    # Entity by entity too: three failed writes present, two lost.
    assert len(check.check_lost_writes(h, final, {})) == 3 + 2


# A scan showing part of a batch, or missing an acknowledged insert.
def test_scans_detected():
    h = [batch(0, 5, "B1", KEYS), ins(6, 7, "b/9", "X"),
         op("scan", 8, 9, pk="b", rows={"1": "B1-0"}, pages=1),
         op("scan", 10, 12, pk="b",
            rows={"1": "B1-0", "2": "B1-1", "3": "B1-2", "9": "X"},
            pages=1)]
    got = check.check_scans(h)
    assert len(got) == 2, got
    assert any("stale scan" in g for g in got)
    assert any("1 of 3" in g for g in got)


# check_all on a clean mixed history: nothing to report.
def test_check_all_clean():
    h = [ins(0, 2, "p/a", "A"), w(1, 3, "v1"), rd(4, 5, "v1"),
         cas(6, 8, "v1", "v2"), batch(9, 10, "B1", KEYS),
         ins(11, None, "p/b", "B", outcome="unknown"),
         cas(12, None, "v2", "v3", outcome="unknown"), rd(30, 31, "v3")]
    final = {"p/a": "A", R: "v3", "b/1": "B1-0", "b/2": "B1-1",
             "b/3": "B1-2"}
    got = check.check_all(h, final, INIT)
    assert all(v == [] for v in got.values()), got
