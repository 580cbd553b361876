"""The master's admin and status HTTP API behind its admin token
(rt-master --admin-token-file, --status-open, --admin-insecure; see
master/README.md and docs/DESIGN.md "Admin API security"), against real
rt-master processes over raw HTTP (http.client: no redirect following, the
exact headers a browser would send):

  - status closed (the default): /health open; /api/status, /metrics
    without a token 401 with WWW-Authenticate: Bearer, a wrong token 403,
    the right one 200; a split without a token 401, wrong 403, right done;
  - the cross-site request forgery case: a simple query-string POST as an
    HTML form on another origin sends it (Origin: http://evil.example,
    form content type, Sec-Fetch-Site: cross-site) is 403 with or without
    the token, and no split happened (status and events); OPTIONS
    preflights are refused and no Access-Control-Allow-* header is sent;
    /metrics counts the refusals by reason;
  - --status-open: the read-only endpoints answer without a token, the
    actions still want it;
  - rotation: a new token in the file and SIGHUP; the old one is 403 at
    once; a token file made unreadable-by-owner-only is kept out on SIGHUP;
  - start: a token file group or others may read, an empty one or a short
    one stops rt-master (exit 2, the reason on stderr, never the token);
    without a token file actions are 403 with how to enable them, or
    served with --admin-insecure (cross-origin still refused);
  - rtctl: without a token "the master wants an admin token: --token-file",
    exit 1; with --token-file, $RT_ADMIN_TOKEN_FILE, $RT_ADMIN_TOKEN or
    ./rt-data/admin.token it works; a wrong one exits 1;
  - three masters: a follower answers an unauthenticated request 401 (no
    307 to the leader); with the token it redirects, and rtctl given the
    follower first reaches the leader;
  - the dashboard in headless chromium (skipped without chromium or a
    node with WebSocket; cdp_steps.js drives it): status closed, it asks
    for the token and shows nothing, then shows the status, keeps the
    token across a reload (sessionStorage, not the URL), splits a range
    from its Actions form, and asks again for a wrong token; status open,
    it shows the status at once, and a split asks for the token then runs.

About 10 s (30 s with chromium).
"""

import http.client
import json
import os
import shutil
import signal
import subprocess
import time

import pytest

from rtcluster import started, _read_port_file

EVIL = "http://evil.example"


# ------------------------------------------------------------ helpers
def req(addr, method, path, headers=None, body=None):
    """(status, headers dict lower-cased, body bytes) of one request."""
    host, port = addr.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        return (r.status, {k.lower(): v for k, v in r.getheaders()},
                r.read())
    finally:
        conn.close()


def bearer(token):
    return {"Authorization": "Bearer " + token}


def ranges_of(cluster, table):
    st = cluster.master_status()
    return [r for r in st["ranges"] if r.get("table") == table]


def ranges_soon(cluster, table, n, timeout=5.0):
    """The table's ranges once the status shows @n of them (the status
    document is rebuilt a moment after a change on a slow build), or the
    last ones seen after @timeout."""
    end = time.monotonic() + timeout
    rs = ranges_of(cluster, table)
    while len(rs) != n and time.monotonic() < end:
        time.sleep(0.05)
        rs = ranges_of(cluster, table)
    return rs


def wait_for(pred, timeout, what):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


def write_token(path, text, mode=0o600):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(path, mode)


class LoneMaster:
    """One rt-master without partition servers, its own flags."""

    def __init__(self, cluster, workdir, *flags):
        self.dir = str(workdir)
        os.makedirs(os.path.join(self.dir, "data"), exist_ok=True)
        self.port_file = os.path.join(self.dir, "ports")
        self.stderr_path = os.path.join(self.dir, "stderr")
        argv = [cluster.bins["master"], "--listen", "127.0.0.1:0",
                "--http", "127.0.0.1:0", "--raft-listen", "127.0.0.1:0",
                "--data", os.path.join(self.dir, "data"),
                "--port-file", self.port_file
                ] + cluster.tls_args("lone-master", "master") + list(flags)
        with open(self.stderr_path, "wb") as err:
            self.p = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                      stdout=subprocess.DEVNULL, stderr=err,
                                      env=cluster.env)

    def wait(self):
        def ready():
            assert self.p.poll() is None, self.stderr()
            p = _read_port_file(self.port_file)
            return p if p and "http" in p else None
        self.addr = "127.0.0.1:%d" % wait_for(ready, 15, "port file")["http"]
        # A lone master elects itself: wait until it acts.
        wait_for(lambda: req(self.addr, "POST", "/api/split?range=999",
                              {})[0] != 503, 15, "the master to lead")
        return self

    def exit_code(self, timeout=15):
        return self.p.wait(timeout=timeout)

    def stderr(self):
        with open(self.stderr_path, errors="replace") as f:
            return f.read()

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


# ------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def closed(tmp_path_factory):
    """Status closed (the master's default), one partition server, RF 1."""
    yield from started(tmp_path_factory, "closed", n_ps=1,
                       replication_factor=1, status_open=False)


@pytest.fixture(scope="module")
def opened(tmp_path_factory):
    yield from started(tmp_path_factory, "opened", n_ps=1,
                       replication_factor=1, status_open=True)


def make_table(cluster, name):
    svc = cluster.table_service_client()
    svc.create_table(name)
    return wait_for(lambda: ranges_of(cluster, name), 10,
                    "the range of " + name)[0]


# ------------------------------------------------------------ tests
def test_token_required_everywhere_but_health(closed):
    """No token: 401 with the Bearer challenge; wrong: 403; right: 200.
    /health and the dashboard page (no data in it) need none."""
    a, tok = closed.master_http_addr, closed.admin_token
    assert req(a, "GET", "/health")[0] == 200
    st, hdr, body = req(a, "GET", "/")
    assert st == 200 and b"sessionStorage" in body
    assert "frame-ancestors 'none'" in hdr.get("content-security-policy", "")
    for path in ("/api/status", "/api/history", "/api/events", "/metrics"):
        st, hdr, body = req(a, "GET", path)
        assert st == 401, (path, st, body)
        assert hdr.get("www-authenticate", "").startswith("Bearer"), hdr
        assert tok.encode() not in body
        st, _, body = req(a, "GET", path, bearer("0" * 64))
        assert st == 403, (path, st, body)
        st, _, body = req(a, "GET", path, {"Authorization": "Basic " + tok})
        assert st == 401, (path, st, body)
        st, _, body = req(a, "GET", path, bearer(tok))
        assert st == 200, (path, st, body)
    # The token is never logged.
    with open(closed.master.stderr_path) as f:
        assert tok not in f.read()


def test_split_needs_the_token(closed):
    """A split without the token is 401, with a wrong one 403 — nothing
    happens — and with the right one it is done."""
    a, tok = closed.master_http_addr, closed.admin_token
    rg = make_table(closed, "authsplit")
    path = "/api/split?range=%d&key=m" % rg["id"]
    assert req(a, "POST", path)[0] == 401
    assert req(a, "POST", path, bearer(tok[:-1] + "x"))[0] == 403
    assert len(ranges_of(closed, "authsplit")) == 1
    st, _, body = req(a, "POST", path, bearer(tok))
    assert st == 200, body
    assert len(ranges_soon(closed, "authsplit", 2)) == 2


def test_cross_site_form_post_changes_nothing(closed):
    """What a page on another origin can make a browser send — a simple
    query-string POST (an HTML form, or fetch with mode no-cors) — is 403
    even with the token in it, and no split happens."""
    a, tok = closed.master_http_addr, closed.admin_token
    rg = make_table(closed, "csrf")
    path = "/api/split?range=%d&key=m" % rg["id"]
    form = {"Origin": EVIL, "Content-Type":
            "application/x-www-form-urlencoded", "Sec-Fetch-Site":
            "cross-site", "Sec-Fetch-Mode": "navigate"}
    st, hdr, body = req(a, "POST", path, form, body=b"x=1")
    assert st == 403, (st, body)
    assert b"cross-origin" in body
    assert not any(k.startswith("access-control-") for k in hdr), hdr
    for extra in ({"Origin": EVIL}, {"Origin": "null"},
                  {"Sec-Fetch-Site": "cross-site"},
                  {"Origin": "http://127.0.0.1:1"}):
        h = dict(bearer(tok), **extra)
        h["Content-Type"] = "text/plain"
        st, _, body = req(a, "POST", path, h, body=b"{}")
        assert st == 403, (extra, st, body)
    # Nothing happened: one range, no split event for it.
    assert len(ranges_of(closed, "csrf")) == 1
    st, _, body = req(a, "GET", "/api/events?limit=0", bearer(tok))
    assert st == 200
    assert not [e for e in json.loads(body) if e.get("kind") == "split"
                and e.get("range") == rg["id"]]
    # The master's own origin (its dashboard) is served.
    own = dict(bearer(tok), Origin="http://" + a)
    own["Sec-Fetch-Site"] = "same-origin"
    st, _, body = req(a, "POST", path, own)
    assert st == 200, body
    assert len(ranges_soon(closed, "csrf", 2)) == 2


def test_preflight_refused(closed):
    """A CORS preflight for an action (or any path) is refused and no
    response grants cross-origin access."""
    a, tok = closed.master_http_addr, closed.admin_token
    pre = {"Origin": EVIL, "Access-Control-Request-Method": "POST",
           "Access-Control-Request-Headers": "authorization"}
    for path in ("/api/split", "/api/drain", "/api/status", "/"):
        st, hdr, _ = req(a, "OPTIONS", path, pre)
        assert st in (403, 405), (path, st)
        assert not any(k.startswith("access-control-") for k in hdr), hdr
    st, hdr, _ = req(a, "GET", "/api/status",
                      dict(bearer(tok), Origin=EVIL))
    assert not any(k.startswith("access-control-") for k in hdr), hdr
    # A GET on an action does not run it; 405s name what is allowed.
    st, hdr, _ = req(a, "GET", "/api/split?range=1", bearer(tok))
    assert st == 405 and hdr.get("allow") == "POST"
    st, hdr, _ = req(a, "OPTIONS", "/api/status", pre)
    assert st == 405 and hdr.get("allow") == "GET, HEAD"


def test_refusals_counted(closed):
    """/metrics counts the refusals by reason (a scraper can alert on a
    token being guessed or a page posting cross-site)."""
    a, tok = closed.master_http_addr, closed.admin_token

    def counts():
        st, _, body = req(a, "GET", "/metrics", bearer(tok))
        assert st == 200
        out = {}
        for line in body.decode().splitlines():
            if line.startswith("rt_master_http_refused_total{"):
                k = line.split('"')[1]
                out[k] = int(line.rsplit(" ", 1)[1])
        return out
    before = counts()
    assert set(before) == {"no_token", "wrong_token", "cross_origin",
                           "no_token_file"}, before
    req(a, "GET", "/api/status")
    req(a, "GET", "/api/status", bearer("0" * 64))
    req(a, "POST", "/api/split?range=1", {"Origin": EVIL})
    after = counts()
    assert after["no_token"] == before["no_token"] + 1
    assert after["wrong_token"] == before["wrong_token"] + 1
    assert after["cross_origin"] == before["cross_origin"] + 1
    assert after["no_token_file"] == 0


def test_status_open_opens_reads_only(opened):
    """--status-open: status, history, events and metrics answer without a
    token; the actions still want it."""
    a = opened.master_http_addr
    for path in ("/api/status", "/api/history", "/api/events", "/metrics"):
        st, _, body = req(a, "GET", path)
        assert st == 200, (path, st, body)
    rg = make_table(opened, "openst")
    path = "/api/split?range=%d&key=m" % rg["id"]
    assert req(a, "POST", path)[0] == 401
    assert req(a, "POST", path, bearer("0" * 64))[0] == 403
    assert req(a, "POST", "/api/drain?server=1")[0] == 401
    assert len(ranges_of(opened, "openst")) == 1


def test_rotation_on_sighup(closed):
    """A new token in the file and SIGHUP: the old one is 403 at once, the
    new one works; a botched file (mode 0644) on SIGHUP keeps the token."""
    a, old = closed.master_http_addr, closed.admin_token
    path = closed.admin_token_file
    new = os.urandom(32).hex()
    try:
        write_token(path, new + "\n")
        closed.master.signal(signal.SIGHUP)
        wait_for(lambda: req(a, "GET", "/api/status", bearer(new))[0] == 200,
                 5, "the new token")
        assert req(a, "GET", "/api/status", bearer(old))[0] == 403
        write_token(path, os.urandom(32).hex() + "\n", 0o644)
        closed.master.signal(signal.SIGHUP)
        time.sleep(0.3)
        assert req(a, "GET", "/api/status", bearer(new))[0] == 200
        assert closed.master.running()
    finally:
        write_token(path, old + "\n")
        closed.master.signal(signal.SIGHUP)
        wait_for(lambda: req(a, "GET", "/api/status", bearer(old))[0] == 200,
                 5, "the old token back")
    with open(closed.master.stderr_path) as f:
        log = f.read()
    assert "too open" in log
    assert new not in log and old not in log


@pytest.mark.parametrize("content,mode,why", [
    (os.urandom(32).hex() + "\n", 0o644, "too open"),
    (os.urandom(32).hex() + "\n", 0o640, "too open"),
    ("\n", 0o600, "empty"),
    ("abcdef0123456789\n", 0o600, "too short"),
])
def test_bad_token_file_refused_at_start(closed, tmp_path, content, mode,
                                         why):
    """rt-master does not start with a token file others may read, an
    empty one or a short one; it says why, never the token."""
    tf = str(tmp_path / "token")
    write_token(tf, content, mode)
    m = LoneMaster(closed, tmp_path, "--admin-token-file", tf)
    try:
        assert m.exit_code() == 2
        err = m.stderr()
        assert why in err, err
        assert content.strip() not in err or not content.strip()
    finally:
        m.stop()


def test_no_token_file_refuses_actions_unless_insecure(closed, tmp_path):
    """Without --admin-token-file actions (and the status) are 403 saying
    how to enable them; --admin-insecure serves them (a cross-origin one
    is still 403)."""
    m = LoneMaster(closed, tmp_path / "a").wait()
    try:
        st, _, body = req(m.addr, "POST", "/api/split?range=999")
        assert st == 403 and b"--admin-token-file" in body, body
        assert req(m.addr, "GET", "/api/status")[0] == 403
        assert req(m.addr, "GET", "/health")[0] == 200
    finally:
        m.stop()
    m = LoneMaster(closed, tmp_path / "b", "--admin-insecure").wait()
    try:
        assert "--admin-insecure" in m.stderr()
        st, _, body = req(m.addr, "POST", "/api/split?range=999")
        assert st == 404, body  # served: there is no range 999
        assert req(m.addr, "GET", "/api/status")[0] == 200
        st, _, _ = req(m.addr, "POST", "/api/split?range=999",
                        {"Origin": EVIL})
        assert st == 403
    finally:
        m.stop()


def test_rtctl_with_and_without_token(closed, tmp_path):
    """rtctl without a token says how to give one (exit 1); with
    --token-file, $RT_ADMIN_TOKEN_FILE, $RT_ADMIN_TOKEN or
    ./rt-data/admin.token it works; a wrong token is exit 1."""
    env = {k: v for k, v in closed.env.items()
           if k not in ("RT_ADMIN_TOKEN_FILE", "RT_ADMIN_TOKEN")}
    base = [closed.bins["rtctl"], "--master-http", closed.master_http_addr]

    def run(*args, extra_env=None, cwd=str(tmp_path)):
        e = dict(env, **(extra_env or {}))
        return subprocess.run(base + list(args), capture_output=True,
                              text=True, env=e, cwd=cwd, timeout=30)

    r = run("status")
    assert r.returncode == 1
    assert "the master wants an admin token: --token-file" in r.stderr
    r = run("split", "1")
    assert r.returncode == 1
    assert "the master wants an admin token" in r.stderr
    assert run("--token-file", closed.admin_token_file,
               "status").returncode == 0
    assert run("status", extra_env={
        "RT_ADMIN_TOKEN_FILE": closed.admin_token_file}).returncode == 0
    assert run("events", extra_env={
        "RT_ADMIN_TOKEN": closed.admin_token}).returncode == 0
    r = run("status", extra_env={"RT_ADMIN_TOKEN": "0" * 64})
    assert r.returncode == 1 and "403" in r.stderr, r.stderr
    os.makedirs(str(tmp_path / "rt-data"), exist_ok=True)
    write_token(str(tmp_path / "rt-data" / "admin.token"),
                closed.admin_token + "\n")
    r = run("status", "--json")
    assert r.returncode == 0, r.stderr
    assert "servers" in json.loads(r.stdout)
    # An action through rtctl with the token is done.
    rg = make_table(closed, "rtctlsplit")
    r = run("--token-file", closed.admin_token_file, "split", str(rg["id"]),
            "m")
    assert r.returncode == 0, r.stderr
    assert len(ranges_soon(closed, "rtctlsplit", 2)) == 2
    assert closed.admin_token not in r.stdout + r.stderr


def test_follower_does_not_redirect_anonymous(tmp_path_factory):
    """A follower refuses an unauthenticated request itself (401, no 307
    naming the leader); with the token it redirects, and rtctl given the
    follower first gets to the leader."""
    gen = started(tmp_path_factory, "ha", n_ps=1, replication_factor=1,
                  masters=3, status_open=False)
    c = next(gen)
    try:
        tok = c.admin_token
        leader = wait_for(c.master_leader, 15, "a leader")
        follower = next(m for m in c.masters if m is not leader)
        fa = "127.0.0.1:%d" % follower.ports["http"]
        for method, path in (("GET", "/api/status"),
                             ("POST", "/api/split?range=1"),
                             ("POST", "/api/masters/transfer"),
                             ("GET", "/metrics")):
            st, hdr, _ = req(fa, method, path)
            assert st == 401, (method, path, st)
            assert "location" not in hdr
            st, hdr, _ = req(fa, method, path, bearer("0" * 64))
            assert st == 403, (method, path, st)
            assert "location" not in hdr
        st, hdr, _ = req(fa, "GET", "/api/status", bearer(tok))
        assert st == 307
        assert hdr["location"].endswith(
            "127.0.0.1:%d/api/status" % leader.ports["http"])
        r = subprocess.run([c.bins["rtctl"], "--master-http", fa, "status",
                            "--json"], capture_output=True, text=True,
                           env=c.env, timeout=30)
        assert r.returncode == 0, r.stderr
        assert len(json.loads(r.stdout)["masters"]) == 3
    finally:
        for _ in gen:
            pass


# ------------------------------------------------------------ dashboard
def _node_argv():
    """node with a WebSocket client (global from node 22, behind a flag in
    node 20), or None."""
    node = shutil.which("node")
    if not node:
        return None
    for flags in ([], ["--experimental-websocket"]):
        r = subprocess.run([node] + flags + [
            "-e", "process.exit(typeof WebSocket === 'function' ? 0 : 1)"],
            capture_output=True)
        if r.returncode == 0:
            return [node] + flags
    return None


def _browse(tmp_path, steps):
    node = _node_argv()
    if not shutil.which("chromium") or not node:
        pytest.skip("the dashboard check needs chromium and node >= 20 "
                    "(apt-get install chromium)")
    sp = str(tmp_path / "steps.json")
    with open(sp, "w") as f:
        json.dump(steps, f)
    r = subprocess.run(node + [os.path.join(os.path.dirname(__file__),
                                            "cdp_steps.js"), sp],
                       capture_output=True, text=True, timeout=120)
    print(r.stdout)
    assert r.returncode == 0, r.stdout + r.stderr[-2000:]


def _split_steps(rid):
    return {"eval": "$('akind').value='split';$('arange').value='%d';"
                    "$('akey').value='m';$('actf').requestSubmit();1" % rid,
            "what": "split range %d from the Actions form" % rid}


def _token_steps(tok):
    return {"eval": "$('tokin').value=%s;$('tokf').requestSubmit();1"
                    % json.dumps(tok), "what": "enter the token"}


def test_dashboard_with_the_token(closed, tmp_path):
    """Status closed: the page asks for the token and shows nothing; with
    it, the status, kept across a reload, a split from the form; a wrong
    token is forgotten and asked again."""
    url = "http://%s/" % closed.master_http_addr
    rid = make_table(closed, "dashclosed")["id"]
    _browse(tmp_path, [
        {"goto": url, "eval": "!$('tokf').hidden && $('tokmsg').textContent",
         "expect": "admin token needed", "what": "asks for the token"},
        {"eval": "$('srv').innerHTML + $('rng').innerHTML", "expect": "",
         "what": "no data without the token"},
        _token_steps(closed.admin_token),
        {"eval": "$('tokf').hidden && $('nsrv').textContent",
         "expect": "1/1 up", "what": "the status with the token"},
        {"eval": "sessionStorage.getItem('rt-admin-token') === %s"
                 % json.dumps(closed.admin_token), "expect": True,
         "what": "the token in sessionStorage"},
        {"eval": "location.href", "expect": url, "what": "not in the URL"},
        {"eval": "location.reload();1", "what": "reload"},
        {"eval": "$('tokf').hidden && $('nsrv').textContent",
         "expect": "1/1 up", "what": "still shown after a reload"},
        _split_steps(rid),
        {"eval": "$('actout').textContent", "match": "^HTTP 200",
         "what": "the split answered 200"},
        {"eval": "sessionStorage.setItem('rt-admin-token','%s');"
                 "location.reload();1" % ("0" * 64),
         "what": "a wrong token, reload"},
        {"eval": "!$('tokf').hidden && $('tokmsg').textContent",
         "expect": "wrong token", "what": "asked again"},
        {"eval": "sessionStorage.getItem('rt-admin-token')", "expect": None,
         "what": "the wrong token forgotten"},
    ])
    assert len(ranges_soon(closed, "dashclosed", 2)) == 2


def test_dashboard_status_open(opened, tmp_path):
    """--status-open: the status shows without a token; a split asks for
    it, then runs."""
    url = "http://%s/" % opened.master_http_addr
    rid = make_table(opened, "dashopen")["id"]
    _browse(tmp_path, [
        {"goto": url, "eval": "$('tokf').hidden && $('nsrv').textContent",
         "expect": "1/1 up", "what": "the status without a token"},
        _split_steps(rid),
        {"eval": "!$('tokf').hidden && $('tokmsg').textContent",
         "expect": "admin token needed", "what": "the split asks"},
        _token_steps(opened.admin_token),
        {"eval": "$('actout').textContent", "match": "^HTTP 200",
         "what": "the split ran with the token"},
    ])
    assert len(ranges_of(opened, "dashopen")) == 2
