"""Checkers of the fault harness: pure functions over a history and the
final state read back (docs/DESIGN-replication.md §1 G1-G3, §11.3).

A history is a list of dicts, one per client operation (JSON lines on
disk), each with:

  invoke_ms, complete_ms   client clock, ms; complete_ms is None when the
                           outcome is unknown (it may take effect any time
                           after invoke_ms, or never)
  op                       insert | upsert | replace | read | scan | batch
  key                      "PK/RK" (insert, upsert, replace, read)
  value                    the unique value written, or the value read
                           (None: read found nothing)
  expect                   replace only: the value the client read with the
                           ETag it sends as If-Match (values are unique, so
                           "ETag matches" is "register holds this value")
  keys, values             batch: every entity of the batch, in order
  pk, rows                 scan: the partition and {RK: value} it returned
  pages                    scan: how many pages it took
  outcome, code            ok | fail | unknown, and the HTTP status or
                           error code of a fail

The final state is {"PK/RK": value} of the whole table after the run.

Registers are keys written by upsert/replace (and read); insert and batch
keys are written once. Register keys start with an initial value that the
harness writes before the history begins: pass it in @initial.

Every checker returns a list of violation strings (empty = passed); none
raises on a bad history. The checkers never guess: an operation whose
outcome is unknown is allowed to have happened or not, and only orders
that real time forces (a completed before b was invoked) are used.
"""

import bisect

INF = float("inf")


def _end(op):
    """When the op's effect is known to be over: +inf for unknown."""
    if op.get("outcome") == "unknown" or op.get("complete_ms") is None:
        return INF
    return op["complete_ms"]


def _before(a, b):
    """a completed before b was invoked (ties count as concurrent)."""
    return _end(a) < b["invoke_ms"]


def _fmt(op):
    keep = ("op", "key", "expect", "value", "outcome", "code", "invoke_ms",
            "complete_ms", "client")
    return "{%s}" % ", ".join("%s=%r" % (k, op[k]) for k in keep if k in op)


# ------------------------------------------------------------ (a) lost
def _writes(history):
    """{key: [write ops on it]} for insert/upsert/replace, plus batch
    entities as pseudo-ops carrying the batch's times and outcome."""
    out = {}
    for op in history:
        if op["op"] in ("insert", "upsert", "replace"):
            out.setdefault(op["key"], []).append(op)
        elif op["op"] == "batch":
            for k, v in zip(op["keys"], op["values"]):
                w = dict(op, op="batch-write", key=k, value=v)
                out.setdefault(k, []).append(w)
    return out


def check_lost_writes(history, final, initial=None):
    """(a) Every acknowledged write is present at the end with its content,
    unless a write that may have come after it replaced it. Also: the
    final value of a key was written by someone (no invented value), and
    a write that definitely failed did not take effect."""
    initial = initial or {}
    problems = []
    writes = _writes(history)
    for key, ws in sorted(writes.items()):
        got = final.get(key)
        by_value = {}
        for w in ws:
            by_value.setdefault(w["value"], []).append(w)
        if got is not None and got not in by_value and \
                initial.get(key) != got:
            problems.append("%s holds %r, which no write wrote" % (key, got))
            continue
        # Who wrote the final value: an op, or the initial state.
        writers = [w for w in by_value.get(got, [])]
        for w in ws:
            if w["outcome"] != "ok" or w["value"] == got:
                continue
            if got is None:
                problems.append("lost write: %s is absent at the end; "
                                "acknowledged %s" % (key, _fmt(w)))
                continue
            # The final writer must be able to come after w: not every
            # candidate may be definitely before it.
            if writers and not all(_before(f, w) for f in writers):
                continue
            problems.append("lost write: %s ends with %r, written before "
                            "the acknowledged %s" % (key, got, _fmt(w)))
        for w in by_value.get(got, []):
            if w["outcome"] == "fail" and len(by_value[got]) == 1:
                problems.append("failed write took effect: %s holds %r of "
                                "%s" % (key, got, _fmt(w)))
    return problems


# ------------------------------------------------------------ (b) WGL
def _register_ops(history, key):
    """The ops of one register as (inv, end, kind, arg1, arg2) for WGL.
    Reads and writes that did not happen are dropped: a fail that is not
    412 wrote nothing, a read without an answer observed nothing. A 412
    replace is kept: it observed that the register did not hold expect."""
    ops = []
    for op in history:
        if op.get("key") != key:
            continue
        kind, oc = op["op"], op["outcome"]
        if kind == "read":
            if oc == "ok":
                ops.append((op, ("read", op["value"], None)))
        elif kind in ("upsert", "insert"):
            if oc != "fail":
                ops.append((op, ("write", op["value"], None)))
        elif kind == "replace":
            if oc == "fail" and str(op.get("code")) == "412":
                ops.append((op, ("cas-fail", op["expect"], None)))
            elif oc != "fail":
                ops.append((op, ("cas", op["expect"], op["value"])))
    return ops


def _step(state, f):
    kind, a, b = f
    if kind == "read":
        return (state == a), state
    if kind == "write":
        return True, a
    if kind == "cas":
        return (state == a), b
    if kind == "cas-fail":
        return (state != a), state
    raise ValueError(kind)


class _Entry:
    __slots__ = ("id", "call", "f", "match", "prev", "next")

    def __init__(self, id_, call, f=None):
        self.id = id_
        self.call = call
        self.f = f
        self.match = None
        self.prev = None
        self.next = None


def wgl_register(ops, init, max_states=2_000_000):
    """Wing-Gong search with Lowe's memoisation for one register.
    @ops: [(op_dict, f)] as from _register_ops; unknown ops have no return
    event, so they may be linearised at any point after their call or left
    out. Returns (True, None) when a linearisation exists, (False, op)
    with the op whose completion stopped the longest partial
    linearisation, or (None, reason) when the search gave up (too many
    states: reported, never silently passed)."""
    events = []
    for i, (op, f) in enumerate(ops):
        events.append((op["invoke_ms"], 0, i, True))
        end = _end(op)
        if end != INF:
            events.append((end, 1, i, False))
    # At equal times calls go first: such ops count as concurrent.
    events.sort()
    head = _Entry(-1, False)
    tail = head
    calls = {}
    for t, _, i, is_call in events:
        e = _Entry(i, is_call, ops[i][1] if is_call else None)
        if is_call:
            calls[i] = e
        else:
            calls[i].match = e
        tail.next = e
        e.prev = tail
        tail = e
    n_returns = sum(1 for _, _, _, c in events if not c)

    def lift(e):
        e.prev.next = e.next
        if e.next:
            e.next.prev = e.prev
        m = e.match
        if m is not None:
            m.prev.next = m.next
            if m.next:
                m.next.prev = m.prev

    def unlift(e):
        m = e.match
        if m is not None:
            m.prev.next = m
            if m.next:
                m.next.prev = m
        e.prev.next = e
        if e.next:
            e.next.prev = e

    state = init
    linearized = 0
    cache = set()
    stack = []
    remaining = n_returns
    entry = head.next
    deepest = [0, None]
    while remaining > 0:
        # A return is always ahead while one remains (the walk backs up at
        # the first return it meets), so entry is never None here.
        if entry.call:
            ok, new = _step(state, entry.f)
            if ok:
                lin2 = linearized | (1 << entry.id)
                sig = (lin2, new)
                if sig not in cache:
                    cache.add(sig)
                    if len(cache) > max_states:
                        return None, "gave up after %d states" % max_states
                    stack.append((entry, state))
                    state = new
                    linearized = lin2
                    if entry.match is not None:
                        remaining -= 1
                    lift(entry)
                    entry = head.next
                    continue
            entry = entry.next
        else:
            # The return of an op not yet linearised: nothing before it
            # can be placed any more, so undo the last choice. The op
            # that stopped the deepest attempt is the one reported.
            if len(stack) >= deepest[0]:
                deepest[:] = [len(stack), entry.id]
            if not stack:
                return False, ops[deepest[1]][0]
            e, state = stack.pop()
            linearized &= ~(1 << e.id)
            if e.match is not None:
                remaining += 1
            unlift(e)
            entry = e.next
    return True, None


def registers_of(history):
    return sorted({op["key"] for op in history
                   if op["op"] in ("upsert", "replace", "read")})


def check_linearizable(history, initial):
    """(b) Per-key linearizability of every register (WGL)."""
    problems = []
    for key in registers_of(history):
        ops = _register_ops(history, key)
        ok, why = wgl_register(ops, initial.get(key))
        if ok is None:
            problems.append("register %s: linearizability unknown (%s)"
                            % (key, why))
        elif not ok:
            problems.append("register %s: not linearizable; no order "
                            "places %s" % (key, _fmt(why) if why else "?"))
    return problems


# ------------------------------------------------------------ (c) batches
def check_batches(history, final):
    """(c) A batch is all or nothing at the end: ok -> every entity with its
    content, fail -> none, unknown -> all or none, never part."""
    problems = []
    for op in history:
        if op["op"] != "batch":
            continue
        present = [k for k, v in zip(op["keys"], op["values"])
                   if final.get(k) == v]
        n, m = len(op["keys"]), len(present)
        oc = op["outcome"]
        if 0 < m < n:
            problems.append("torn batch %s: %d of %d entities present %s"
                            % (op.get("batch_id"), m, n, present))
        elif oc == "ok" and m == 0:
            problems.append("lost batch %s: acknowledged, none present"
                            % op.get("batch_id"))
        elif oc == "fail" and m == n:
            problems.append("failed batch %s took effect (%s)"
                            % (op.get("batch_id"), op.get("code")))
    return problems


def check_scans(history):
    """Scans see whole batches (one page is one snapshot, G3) and every
    insert acknowledged before the scan began (no stale scan)."""
    problems = []
    batches = {}  # pk -> [(batch id, [(rk, value)])]
    for b in history:
        if b["op"] != "batch":
            continue
        mine = {}
        for k, v in zip(b["keys"], b["values"]):
            pk, rk = k.split("/", 1)
            mine.setdefault(pk, []).append((rk, v))
        for pk, ents in mine.items():
            batches.setdefault(pk, []).append((b.get("batch_id"), ents))
    inserts = {}  # pk -> [(complete_ms, rk, value)] by completion
    for op in history:
        if op["op"] == "insert" and op["outcome"] == "ok":
            pk, rk = op["key"].split("/", 1)
            inserts.setdefault(pk, []).append((op["complete_ms"], rk,
                                               op["value"]))
    for v in inserts.values():
        v.sort()
    for s in history:
        if s["op"] != "scan" or s["outcome"] != "ok":
            continue
        rows = s["rows"]
        pk = s["pk"]
        for done, rk, v in inserts.get(pk, []):
            if done >= s["invoke_ms"]:
                break
            if rows.get(rk) != v:
                problems.append("stale scan of %s at %d: misses %s/%s "
                                "acknowledged at %d" % (pk, s["invoke_ms"],
                                                        pk, rk, done))
        if s.get("pages", 1) != 1:
            continue
        for bid, mine in batches.get(pk, []):
            seen = sum(1 for rk, v in mine if rows.get(rk) == v)
            if 0 < seen < len(mine):
                problems.append("scan of %s at %d shows %d of %d entities "
                                "of batch %s" % (pk, s["invoke_ms"], seen,
                                                 len(mine), bid))
    return problems


# ------------------------------------------------------------ (d) stale
def check_stale_reads(history, initial):
    """(d) No read returns a value older than one acknowledged before the
    read began: the read's value was written by W, some acknowledged W2
    completed before the read was invoked, and W completed before W2 was
    invoked. (b) rejects these too; this names them."""
    problems = []
    index = {}  # key -> (ok writes by invoke, suffix minimum of complete)
    for key, ws in _writes(history).items():
        oks = sorted((w["invoke_ms"], w["complete_ms"], w["value"])
                     for w in ws if w["outcome"] == "ok")
        suffix = [INF] * (len(oks) + 1)
        for i in range(len(oks) - 1, -1, -1):
            suffix[i] = min(oks[i][1], suffix[i + 1])
        by_value = {}
        for w in ws:
            if w["outcome"] != "fail":
                by_value.setdefault(w["value"], []).append(w)
        index[key] = (oks, suffix, by_value)
    for r in history:
        if r["op"] != "read" or r["outcome"] != "ok":
            continue
        key, v = r["key"], r["value"]
        oks, suffix, by_value = index.get(key, ([], [INF], {}))
        src = by_value.get(v, [])
        if not src and initial.get(key) != v:
            continue  # a value nobody wrote: (b) reports it
        # v is stale if an acknowledged write was invoked after every
        # possible writer of v ended and completed before the read began.
        last = max((_end(w) for w in src), default=-INF)
        if last == INF:
            continue
        i = bisect.bisect_right(oks, (last, INF, ""))
        while i < len(oks) and oks[i][0] <= last:
            i += 1
        if suffix[i] < r["invoke_ms"]:
            w2 = min((o for o in oks[i:]), key=lambda o: o[1])
            problems.append("stale read %s returned %r after %r was "
                            "acknowledged at %d: %s"
                            % (key, v, w2[2], w2[1], _fmt(r)))
    return problems


# ------------------------------------------------------------ all
def check_all(history, final, initial):
    """{checker name: [violations]} for every checker."""
    return {
        "lost": check_lost_writes(history, final, initial),
        "linearizable": check_linearizable(history, initial),
        "batches": check_batches(history, final),
        "scans": check_scans(history),
        "stale": check_stale_reads(history, initial),
    }
