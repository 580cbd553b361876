"""The dashboard's Key Visualizer and the history behind it, against a real
cluster (one master with --policy none, two partition servers, RF 1):

  - GET /api/history?res=10 (no browser): the 10 s frames of the last
    hour, each stamped with the start of its 10 s bucket, at most 360,
    every range and server they name known; a range's 10 s demand is the
    mean of its 1 s demands in that bucket (under a steady SDK writer);
    res=1 is the 1 s ring, any other res a 400;
  - the page in headless chromium (skipped without chromium or a node
    with WebSocket; cdp_steps.js drives it): the heat map draws the live
    cluster's ranges, the zoom buttons and the mouse wheel narrow the
    visible time window (shift+wheel the keys), a click on a range opens
    its drill-down with its id, a split made through the API is a marker
    at its time and key (toggled with all decisions and by kind), colour
    by server names each server's hue, a click on a server row
    (per-server view) lists its ranges, "save" downloads the live history
    and the events of the time it covers (from a step before its first
    frame) as a keyviz.json, a keyviz.json built from /api/history + /api/events (the shape rt-sim
    writes) opened through the file input is shown with a banner and live
    updates paused, "back to live" returns; a file with markup in its
    table names and events shows it as text and runs none of it; no
    uncaught exception or console error on the page.

Every wait is for a condition (the split's children busy in the 1 s
history, a 10 s frame after the writer started), not a fixed time. About
40 s (the 10 s history needs two buckets).
"""

import json
import threading
import time
import urllib.request

import pytest

from rtcluster import started
from test_admin_auth import _browse

TABLE = "keyviz"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from started(tmp_path_factory, "keyviz", n_ps=2,
                       replication_factor=1,
                       extra_args={"master": ["--policy", "none"]})


def get(c, path):
    status, body = c._http_get_master(path)
    return status, body


def get_json(c, path):
    status, body = get(c, path)
    assert status == 200, (path, status, body[:300])
    return json.loads(body)


def post(c, path):
    req = urllib.request.Request(
        "http://%s%s" % (c.master_http_addr, path), data=b"", method="POST",
        headers=c.admin_headers())
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read() or b"null")


def wait_for(pred, timeout, what):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError("timed out waiting for " + what)


@pytest.fixture(scope="module")
def loaded(cluster):
    """A table split at "m" into two ranges, an SDK writer on both halves
    for the whole module, and the split's event."""
    svc = cluster.table_service_client()
    svc.create_table(TABLE)
    tc = svc.get_table_client(TABLE)
    rid = wait_for(lambda: [r["id"] for r in cluster.master_status()["ranges"]
                            if r.get("table") == TABLE], 10, "the range")[0]
    post(cluster, "/api/split?range=%d&key=m" % rid)
    ev = wait_for(lambda: [e for e in get_json(cluster, "/api/events")
                           if e["kind"] == "split" and e.get("range") == rid
                           and e.get("outcome") == "ok"], 10, "split event")
    stop = threading.Event()

    def writer():
        i = 0
        while not stop.is_set():
            for pk in ("a", "z"):
                tc.upsert_entity({"PartitionKey": pk, "RowKey": str(i % 50),
                                  "v": i})
            i += 1
            time.sleep(0.01)

    t = threading.Thread(target=writer, daemon=True)
    t_write = time.time() * 1000
    t.start()
    children = ev[-1]["new_ranges"]

    def both_halves_busy():
        # The 1 s history is rebuilt once a second: wait until a frame
        # names both children with the writer's load, and the document
        # names their bounds.
        h = get_json(cluster, "/api/history")
        busy = {r for f in h["frames"] for r, d, _ in f["r"] if d > 0}
        return (all(c in busy and str(c) in h["ranges"] for c in children)
                or None)
    wait_for(both_halves_busy, 20, "both halves of the split busy in the "
             "1 s history")
    yield {"parent": rid, "split": ev[-1], "children": children,
           "t_write": t_write}
    stop.set()
    t.join(10)


# ------------------------------------------------------------ the API
def test_history_res10_shape_and_bounds(cluster, loaded):
    """The 10 s frames: bucket starts, bounded, every id known, and each
    range's demand the mean of its 1 s ones over the bucket."""
    def two_frames():
        # Two frames, the newest one a whole bucket of the writer after
        # the split (a slow start can put the split after the first ones).
        h = get_json(cluster, "/api/history?res=10")
        return h if (len(h["frames"]) >= 2 and
                     h["frames"][-1]["t"] >= loaded["t_write"]) else None
    co = wait_for(two_frames, 60, "two 10 s frames, the newest after the "
                  "writer started")
    fine = get_json(cluster, "/api/history")
    now = time.time() * 1000
    assert co["step_ms"] == 10000 and co["max_frames"] == 360
    assert fine["step_ms"] == 1000 and fine["max_frames"] == 120
    assert co["tables"] == fine["tables"]
    ts = [f["t"] for f in co["frames"]]
    assert ts == sorted(set(ts)) and len(ts) <= 360
    for f in co["frames"]:
        assert f["t"] % 10000 == 0
        assert f["t"] + 10000 <= now + 1000  # only finished buckets
        for rid, demand, server in f["r"]:
            assert str(rid) in co["ranges"] and demand >= 0
            assert server in [s for s, _ in f["s"]]
    # The newest 10 s frame against the 1 s frames of its bucket (all of
    # them still in the 2-minute ring).
    last = co["frames"][-1]
    # No split in that bucket (the one split came before): the ranges add
    # up to the servers' totals.
    assert sum(d for _, d, _ in last["r"]) == pytest.approx(
        sum(d for _, d in last["s"]), abs=len(last["r"]) + 1)
    inb = [f for f in fine["frames"]
           if last["t"] <= f["t"] < last["t"] + 10000]
    assert len(inb) >= 8, [f["t"] for f in fine["frames"]][:12]
    busy = 0
    for rid, demand, _ in last["r"]:
        mine = [d for f in inb for r, d, _ in f["r"] if r == rid]
        assert mine
        # the 1 s values are rounded in JSON: within 1 of the mean
        assert demand == pytest.approx(sum(mine) / len(mine), abs=1.01)
        busy += demand > 0
    assert busy >= 2  # the writer's two halves
    for child in loaded["children"]:
        assert str(child) in co["ranges"]
        assert co["ranges"][str(child)]["table_id"] == \
            loaded["split"]["table_id"]


def test_history_res_values(cluster):
    """res=1 is the 1 s ring, anything but 1 or 10 a 400."""
    assert get_json(cluster, "/api/history?res=1")["step_ms"] == 1000
    for bad in ("5", "abc", "", "100"):
        status, body = get(cluster, "/api/history?res=" + bad)
        assert status == 400, (bad, status)
        assert b"res" in body


# ------------------------------------------------------------ the page
def _keyviz_doc(c):
    return {"history": get_json(c, "/api/history"),
            "events": get_json(c, "/api/events"),
            "source": "rt-sim", "policy": "default", "seed": 7}


def open_file_js(doc, name="keyviz.json"):
    """Page JS that opens @doc as a file through the file input (the path
    a user's pick takes: a change event, then FileReader)."""
    return ("(()=>{const f=new File([%s],%s,{type:'application/json'});"
            "const dt=new DataTransfer();dt.items.add(f);"
            "$('kvfile').files=dt.files;"
            "$('kvfile').dispatchEvent(new Event('change'));return 1})()"
            % (json.dumps(json.dumps(doc)), json.dumps(name)))


def test_key_visualizer_in_chromium(cluster, loaded, tmp_path):
    url = "http://%s/" % cluster.master_http_addr
    left, right = loaded["children"]
    seq = loaded["split"]["seq"]
    doc = _keyviz_doc(cluster)
    nframes = len(doc["history"]["frames"])
    # The file view gets a range the live one never had, so the test can
    # tell the two apart.
    doc["history"]["ranges"]["999999"] = dict(
        doc["history"]["ranges"][str(right)])
    for f in doc["history"]["frames"]:
        f["r"] = [[999999 if r == right else r, d, s] for r, d, s in f["r"]]
    open_js = open_file_js(doc)
    bad = "<img src=x onerror=window.pwned=1>"
    hostile = json.loads(json.dumps(doc))
    hostile["history"]["tables"] = {
        k: bad for k in hostile["history"]["tables"]}
    hostile["events"].append({
        "seq": bad, "kind": "move", "time": bad, "range": left,
        "table_id": loaded["split"]["table_id"], "low": "", "high": "m",
        "server": bad, "to": bad, "outcome": bad, "reason": bad,
        "unix_ms": doc["history"]["frames"][-1]["t"]})
    click_js = (
        "(()=>{const p=kv.locate(%d);if(!p)return null;"
        "$('heat').dispatchEvent(new MouseEvent('click',{clientX:p.x,"
        "clientY:p.y,bubbles:true}));return $('kvdrill').hidden?null:"
        "$('kvdrill').querySelector('h3').textContent})()")
    _browse(tmp_path, [
        {"goto": url,
         "eval": "[%d,%d].every(r=>kv.drawn.ranges.includes(r))"
                 % (left, right),
         "expect": True, "timeout": 10000,
         "what": "the heat map draws both halves of the split"},
        {"eval": "window.w0=kv.drawn.t1-kv.drawn.t0;$('kvin').click();"
                 "Math.round(w0/(kv.drawn.t1-kv.drawn.t0)*100)/100",
         "expect": 2, "what": "zoom in halves the visible time window"},
        {"eval": "(()=>{const r=$('heat').getBoundingClientRect();"
                 "window.w1=kv.drawn.t1-kv.drawn.t0;"
                 "$('heat').dispatchEvent(new WheelEvent('wheel',{deltaY:100,"
                 "clientX:r.left+r.width/2,clientY:r.top+50,bubbles:true,"
                 "cancelable:true}));"
                 "return Math.round((kv.drawn.t1-kv.drawn.t0)/w1*100)/100})()",
         "expect": 1.25, "what": "the wheel zooms the time window out"},
        {"eval": "(()=>{const r=$('heat').getBoundingClientRect();"
                 "$('heat').dispatchEvent(new WheelEvent('wheel',{deltaY:-100,"
                 "shiftKey:true,clientX:r.left+r.width/2,clientY:r.top+50,"
                 "bubbles:true,cancelable:true}));"
                 "return Math.round((kv.view.y1-kv.view.y0)*100)/100})()",
         "expect": 0.8, "what": "shift+wheel zooms the key axis in"},
        {"eval": "$('kvreset').click();Math.round((kv.drawn.t1-kv.drawn.t0)"
                 "/1000)+' '+(kv.view.y1-kv.view.y0)", "expect": "120 1",
         "what": "reset: the last 2 minutes, every key"},
        {"eval": click_js % left, "expect": "range %d" % left,
         "what": "a click on a range opens its drill-down"},
        {"eval": "$('kvdrill').textContent", "match": "split",
         "what": "the drill-down lists the range's split event"},
        {"eval": "kv.drawn.markers.some(m=>m.kind==='split'&&m.seq===%d)"
                 % seq, "expect": True,
         "what": "the split is a marker on the heat map"},
        {"eval": "$('kvev').click();kv.drawn.markers.length",
         "expect": 0, "what": "decisions toggled off"},
        {"eval": "$('kvev').click();kv.drawn.markers.length>0",
         "expect": True, "what": "and on again"},
        {"eval": "document.querySelector('#kvkinds [data-kind=split]').click();"
                 "kv.drawn.markers.some(m=>m.kind==='split')",
         "expect": False, "what": "split markers toggled off by kind"},
        {"eval": "document.querySelector('#kvkinds [data-kind=split]').click();"
                 "kv.drawn.markers.some(m=>m.kind==='split')",
         "expect": True, "what": "and on again"},
        {"eval": "$('kvmode').value='server';"
                 "$('kvmode').dispatchEvent(new Event('change'));"
                 "$('kvsrv').textContent", "match": "^hue: . server \\d",
         "what": "colour by server: the legend names each server's hue"},
        {"eval": "$('kvmode').value='servers';"
                 "$('kvmode').dispatchEvent(new Event('change'));"
                 "(()=>{const r=$('heat').getBoundingClientRect(),G=kv.geo;"
                 "$('heat').dispatchEvent(new MouseEvent('click',{clientX:"
                 "r.left+G.left+G.pw-3,clientY:r.top+G.top+5,bubbles:true}));"
                 "return $('kvdrill').querySelector('h3').textContent+' '+"
                 "$('kvdrill').querySelectorAll('[data-rid]').length})()",
         "match": r"^server \d+ [1-9]",
         "what": "per-server view: a click on a server lists its ranges"},
        {"eval": "$('kvmode').value='ranges';"
                 "$('kvmode').dispatchEvent(new Event('change'));1"},
        {"eval": "(async()=>{let b;const o=URL.createObjectURL,c="
                 "HTMLAnchorElement.prototype.click;URL.createObjectURL=x=>{"
                 "b=x;return o.call(URL,x)};HTMLAnchorElement.prototype.click="
                 "function(){};try{$('kvsave').click();}finally{"
                 "URL.createObjectURL=o;HTMLAnchorElement.prototype.click=c;}"
                 "const d=JSON.parse(await b.text()),h=d.history,"
                 "t0=h.frames.length?h.frames[0].t-h.step_ms:1/0;"
                 # The events of the time the frames cover (a frame is the
                 # step before its time): the split with them unless the
                 # 2-minute ring has moved past it on a slow run.
                 "return [h.step_ms,h.frames.length>0,"
                 "d.events.every(e=>e.unix_ms>=t0),"
                 "d.events.some(e=>e.seq===%d)===(%d>=t0),"
                 "d.source.startsWith('rangetable master'),d.policy]})()"
                 % (seq, loaded["split"]["unix_ms"]),
         "expect": [1000, True, True, True, True, "none"],
         "what": "save: the live 1 s history and the events of its time as "
                 "a keyviz.json"},
        {"eval": open_js, "what": "open a keyviz.json built from the API"},
        {"eval": "$('kvban').hidden?'':$('kvbantext').textContent",
         "match": "^Showing keyviz.json from rt-sim, policy default, "
                  "seed 7: %d frames" % nframes,
         "what": "the banner names the file"},
        {"eval": "kv.data.frames.length===%d&&kv.drawn.ranges.includes(999999)"
                 "&&!kv.drawn.ranges.includes(%d)" % (nframes, right),
         "expect": True, "what": "the file's ranges are drawn"},
        {"eval": "kv.drawn.markers.some(m=>m.kind==='split'&&m.seq===%d)"
                 % seq, "expect": True,
         "what": "the file's split event is a marker"},
        {"eval": "new Promise(r=>{const t=kv.data.tmax;setTimeout(()=>r("
                 "kv.data.tmax===t&&kv.data.frames.length===%d),2500)})"
                 % nframes, "expect": True,
         "what": "live updates paused"},
        {"eval": "$('kvlive').click();$('kvban').hidden&&"
                 "kv.drawn.ranges.includes(%d)" % right, "expect": True,
         "what": "back to live"},
        {"eval": "(()=>{const f=new File(['{\"x\":1}'],'bad.json');"
                 "const dt=new DataTransfer();dt.items.add(f);"
                 "$('kvfile').files=dt.files;"
                 "$('kvfile').dispatchEvent(new Event('change'));return 1})()"},
        {"eval": "$('kvbantext').textContent",
         "match": "^cannot open bad.json: not a keyviz file",
         "what": "a file of another shape is refused, said so"},
        # A hostile file: markup in a table name, a key and event fields is
        # shown as text, never run.
        {"eval": open_file_js(hostile),
         "what": "open a keyviz.json with markup in its strings"},
        {"eval": (click_js % left) + "+' '+$('kvdrill').textContent",
         "match": "^range %d .*<img" % left,
         "what": "the drill-down shows the markup as text"},
        {"eval": "(()=>{const m=kv.drawn.markers.find(m=>m.kind==='move');"
                 "const r=$('heat').getBoundingClientRect();"
                 "$('heat').dispatchEvent(new MouseEvent('mousemove',{clientX:"
                 "r.left+m.x,clientY:r.top+m.y,bubbles:true}));"
                 "return $('kvtip').textContent})()",
         "match": "<img", "what": "so does the marker's tooltip"},
        {"eval": "new Promise(r=>setTimeout(()=>r(window.pwned===undefined&&"
                 "!document.querySelector('#kvdrill img,#kvtip img,"
                 "#kvtab img')),300))",
         "expect": True, "what": "no markup from the file ran"},
        {"eval": "$('kvlive').click();1"},
        {"noErrors": True, "what": "no page errors"},
    ])
