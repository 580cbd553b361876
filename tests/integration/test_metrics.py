"""Prometheus metrics of every daemon, through real processes.

A master, three partition servers (replication factor 3) and a front end
(tests/integration/rtcluster.py, which starts every daemon with its
--http metrics listener). The official Python SDK makes a known set of
requests, successes and failures; the front end's counters and histograms
must move by exactly those, for that account, operation and status, and
the pages must parse as the Prometheus text format (prometheus_client's
parser). The partition servers must export replication lag and lease
state for the replicated range, the master the under-replicated ranges
once a partition server is killed. deploy/prometheus/*.yml must pass
promtool, and every rt_* metric the alert rules use must exist in a live
scrape.

Tests in this module run in order and share the cluster.
"""

import http.client
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.request

import pytest
from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:  # pragma: no cover - the test deps install it
    text_string_to_metric_families = None

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PROM_DIR = os.path.join(ROOT, "deploy", "prometheus")
ACCOUNT = "devstoreaccount1"
TABLE = "metricsprobe"
N_INSERTS = 7


# ------------------------------------------------------------ helpers
def get_text(hostport, path="/metrics"):
    with urllib.request.urlopen("http://%s%s" % (hostport, path),
                                timeout=10) as r:
        assert r.status == 200
        ctype = r.headers.get("Content-Type", "")
        return r.read().decode(), ctype


def parse(text):
    """{(name, frozenset(labels.items())): value} of every sample; fails
    on anything the Prometheus text-format parser refuses, and on a
    metric family without HELP and TYPE."""
    if text_string_to_metric_families is None:
        pytest.skip("python3-prometheus-client is not installed "
                    "(deploy/install-deps.sh --test installs it)")
    samples = {}
    for fam in text_string_to_metric_families(text):
        assert fam.type in ("counter", "gauge", "histogram"), fam.name
        for s in fam.samples:
            key = (s.name, frozenset(s.labels.items()))
            assert key not in samples, "duplicate series %r" % (key,)
            samples[key] = s.value
    for name in set(re.findall(r"^(rt_[a-z0-9_]+)", text, re.M)):
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        assert ("# TYPE %s " % base) in text or \
            ("# TYPE %s " % name) in text, "no TYPE for " + name
    return samples


def value(samples, name, **labels):
    return samples.get((name, frozenset(labels.items())), 0.0)


def fe_scrape(cluster):
    text, ctype = get_text("127.0.0.1:%d" % cluster.frontend.ports["metrics"])
    assert ctype.startswith("text/plain; version=0.0.4")
    return text, parse(text)


def ps_scrape(p):
    return parse(get_text("127.0.0.1:%d" % p.ports["http"])[0])


def wait_for(what, pred, timeout=20.0):
    deadline = time.monotonic() + timeout
    while True:
        got = pred()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.2)


# ------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def table(cluster):
    svc = cluster.table_service_client()
    return svc.create_table(TABLE)


# ------------------------------------------------------------ tests
def test_promtool_checks_config_and_rules(tmp_path):
    """The example scrape config and alert rules are valid Prometheus.
    promtool insists that the masters' admin token file exists: the
    config is checked as copied to a host that has it (here, @tmp_path)."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (Debian package prometheus; "
                    "deploy/install-deps.sh --test installs it)")
    token = tmp_path / "rangetable-admin.token"
    token.write_text("0" * 64 + "\n")
    os.chmod(token, 0o600)
    with open(os.path.join(PROM_DIR, "prometheus.yml")) as f:
        conf = f.read()
    want = "/etc/prometheus/rangetable-admin.token"
    assert want in conf
    (tmp_path / "prometheus.yml").write_text(conf.replace(want, str(token)))
    shutil.copy(os.path.join(PROM_DIR, "alerts.yml"), tmp_path / "alerts.yml")
    for args in (["check", "config", str(tmp_path / "prometheus.yml")],
                 ["check", "rules", str(tmp_path / "alerts.yml")]):
        r = subprocess.run([promtool] + args, capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr


def test_listener_is_not_the_table_port(cluster, table):
    """/metrics and /health on the status port; on the Table API port
    `metrics` is just a table name (here: one that does not exist)."""
    text, _ = get_text("127.0.0.1:%d" % cluster.frontend.ports["metrics"],
                       "/health")
    assert text == "ok"
    metrics_table = cluster.table_service_client().get_table_client(
        "metrics")
    with pytest.raises(ResourceNotFoundError):
        list(metrics_table.query_entities("PartitionKey eq 'x'"))
    # Only GET and HEAD.
    c = http.client.HTTPConnection(
        "127.0.0.1", cluster.frontend.ports["metrics"], timeout=10)
    c.request("POST", "/metrics", body=b"x")
    r = c.getresponse()
    r.read()
    assert r.status == 405
    c.close()


def test_frontend_counts_exactly_what_was_done(cluster, table):
    """Inserts, a duplicate (409), a get, a missing get (404) and a query
    move rt_fe_requests_total and the latency histogram's counts by
    exactly that, for this account, operation and status."""
    _, before = fe_scrape(cluster)
    for i in range(N_INSERTS):
        table.create_entity({"PartitionKey": "p", "RowKey": "r%d" % i,
                             "n": i})
    with pytest.raises(ResourceExistsError):
        table.create_entity({"PartitionKey": "p", "RowKey": "r0"})
    assert table.get_entity("p", "r3")["n"] == 3
    with pytest.raises(ResourceNotFoundError):
        table.get_entity("p", "nosuchrow")
    rows = list(table.query_entities("PartitionKey eq 'p'"))
    assert len(rows) == N_INSERTS
    table.upsert_entity({"PartitionKey": "p", "RowKey": "r1", "n": 10})
    _, after = fe_scrape(cluster)

    def delta(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    want = {("InsertEntity", "201"): N_INSERTS,
            ("InsertEntity", "409"): 1,
            ("GetEntity", "200"): 1,
            ("GetEntity", "404"): 1,
            ("QueryEntities", "200"): 1,
            ("InsertOrMergeEntity", "204"): 1}
    for (op, status), n in want.items():
        assert delta("rt_fe_requests_total", account=ACCOUNT, operation=op,
                     status=status) == n, (op, status)
    # Nothing else moved for this account.
    moved = {}
    for (name, labels), v in after.items():
        if name == "rt_fe_requests_total":
            d = v - before.get((name, labels), 0.0)
            if d:
                lab = dict(labels)
                moved[(lab["operation"], lab["status"])] = d
    assert moved == want
    hist = "rt_fe_request_duration_seconds"
    for op, cls, n in (("InsertEntity", "2xx", N_INSERTS),
                       ("InsertEntity", "4xx", 1), ("GetEntity", "4xx", 1),
                       ("GetEntity", "2xx", 1)):
        lab = dict(account=ACCOUNT, operation=op, status_class=cls)
        assert delta(hist + "_count", **lab) == n, (op, cls)
        assert delta(hist + "_bucket", le="+Inf", **lab) == n
        assert delta(hist + "_sum", **lab) > 0
    # Entity RPCs reached one partition server (the range's primary):
    # every request above but the 409 insert... all are one RPC each.
    rpc = sum(v - before.get((name, labels), 0.0)
              for (name, labels), v in after.items()
              if name == "rt_fe_ps_rpc_duration_seconds_count")
    assert rpc == N_INSERTS + 1 + 2 + 1 + 1
    assert delta("rt_fe_request_body_bytes_total", account=ACCOUNT) > 0
    assert delta("rt_fe_response_body_bytes_total", account=ACCOUNT) > 0
    assert value(after, "rt_fe_map_version") >= 1
    assert value(after, "rt_fe_connections_open") >= 1
    # The last request ends (libmicrohttpd done with it) just after its
    # response went out.
    wait_for("no request in flight",
             lambda: value(fe_scrape(cluster)[1],
                           "rt_fe_requests_in_flight") == 0, timeout=5)


def test_unknown_account_is_not_a_label(cluster):
    """A request for an account the front end does not serve counts as
    account "_other": a client cannot create label values. A request
    refused by authentication counts under the operation it was for, as
    in Azure's metrics."""
    def send(path, account):
        c = http.client.HTTPConnection("127.0.0.1", cluster.fe_port,
                                       timeout=10)
        c.request("GET", path,
                  headers={"x-ms-version": "2019-02-02",
                           "x-ms-date": "Mon, 01 Jan 2024 00:00:00 GMT",
                           "Authorization": "SharedKey %s:AAAA" % account})
        r = c.getresponse()
        r.read()
        c.close()
        return r.status

    _, before = fe_scrape(cluster)
    assert send("/nosuchaccount7/Tables", "nosuchaccount7") == 403
    assert send("/%s/%s(PartitionKey='p',RowKey='r1')" % (ACCOUNT, TABLE),
                ACCOUNT) == 403
    text, after = fe_scrape(cluster)
    assert "nosuchaccount7" not in text
    for lab in (dict(account="_other", operation="QueryTables",
                     status="403"),
                dict(account=ACCOUNT, operation="GetEntity", status="403")):
        assert value(after, "rt_fe_requests_total", **lab) - \
            value(before, "rt_fe_requests_total", **lab) == 1, lab


def test_partition_servers_export_replication(cluster, table):
    """The primary of the table's range reports both secondaries in sync
    (lag series, ISR 3) and its lease held; each secondary how far behind
    it is; all three their RPC and group-commit histograms."""
    def scrape_all():
        return {p.name: ps_scrape(p) for p in cluster.pss}

    def primary_ready():
        pages = scrape_all()
        prim = [n for n, s in pages.items()
                if any(k[0] == "rt_ps_repl_isr_size" and v == 3
                       for k, v in s.items())]
        # Every page rebuilt since the writes (each server's is, once a
        # second, on its own clock).
        fresh = all(value(sp, "rt_ps_group_commit_duration_seconds_count")
                    >= N_INSERTS for sp in pages.values())
        return (prim[0], pages) if len(prim) == 1 and fresh else None

    # Pages are rebuilt every second: wait for the range to settle.
    prim, pages = wait_for("a primary with an ISR of 3, every page fresh",
                           primary_ready)
    s = pages[prim]
    lag = {dict(k[1])["peer"]: v for k, v in s.items()
           if k[0] == "rt_ps_repl_peer_lag_lsn"}
    assert len(lag) == 2
    assert all(dict(k[1])["isr"] == "1" for k in s
               if k[0] == "rt_ps_repl_peer_lag_lsn")
    ranges = {dict(k[1])["range"] for k in s
              if k[0] == "rt_ps_repl_lease_held"}
    assert ranges
    assert all(value(s, "rt_ps_repl_lease_held", range=r) == 1
               for r in ranges)
    assert value(s, "rt_ps_repl_under_replicated_ranges") == 0
    assert value(s, "rt_ps_rpc_duration_seconds_count",
                 method="ENTITY_WRITE") >= N_INSERTS
    for name, sp in pages.items():
        assert value(sp, "rt_ps_group_commit_duration_seconds_count") > 0
        assert value(sp, "rt_ps_disk_size_bytes") > 0
        assert value(sp, "rt_ps_store_file_bytes") > 0
        if name != prim:
            assert any(k[0] == "rt_ps_repl_behind_lsn" for k in sp), name


def test_alert_rule_metrics_exist(cluster, table):
    """Every rt_* metric the alert rules use is exported by a live
    daemon (a rule on a misspelt metric would never fire)."""
    with open(os.path.join(PROM_DIR, "alerts.yml")) as f:
        rules = f.read()
    used = set(re.findall(r"\b(rt_[a-z0-9_]+)", rules))
    assert used
    text = get_text(cluster.master_http_addr)[0]
    text += get_text("127.0.0.1:%d" % cluster.pss[0].ports["http"])[0]
    text += fe_scrape(cluster)[0]
    exported = set(re.findall(r"^# TYPE (rt_[a-z0-9_]+) ", text, re.M))
    exported |= {n + suf for n in exported
                 for suf in ("_bucket", "_sum", "_count")}
    assert used <= exported, used - exported


def test_master_counts_under_replicated_after_a_kill(cluster, table):
    """Killing one of three partition servers (RF 3) leaves every range
    with an ISR below its replication factor: the master's page says so,
    and counts the server down; a range whose primary died gets another,
    so none stays without a primary."""
    def master_page():
        return parse(get_text(cluster.master_http_addr)[0])

    m = master_page()
    assert value(m, "rt_master_under_replicated_ranges") == 0
    assert value(m, "rt_master_ranges_without_primary") == 0
    assert value(m, "rt_master_leader") == 1
    assert value(m, "rt_master_raft_members", role="voter") == 1
    nranges = value(m, "rt_master_ranges")
    assert nranges >= 1
    cluster.kill("ps3", signal.SIGKILL)
    wait_for("the master to see ps3 down and the ranges under-replicated",
             lambda: (lambda p: value(p, "rt_master_servers",
                                      state="down") == 1 and
                      value(p, "rt_master_under_replicated_ranges") ==
                      nranges)(master_page()),
             timeout=30)
    wait_for("every range to have a live primary",
             lambda: value(master_page(),
                           "rt_master_ranges_without_primary") == 0,
             timeout=30)


def test_every_master_reports_its_raft_view(tmp_path):
    """Three masters: each serves /metrics itself, follower or leader;
    exactly one reports rt_master_leader 1, all agree on the leader id and
    count three voters, and only the leader reports the cluster's
    figures."""
    from rtcluster import Cluster
    c = Cluster(tmp_path, n_ps=1, masters=3, replication_factor=1)
    c.start()
    try:
        def pages():
            return {m.name: parse(get_text("127.0.0.1:%d"
                                           % m.ports["http"])[0])
                    for m in c.masters}

        def settled():
            p = pages()
            leaders = [n for n, s in p.items()
                       if value(s, "rt_master_leader") == 1]
            ids = {value(s, "rt_master_raft_leader_id") for s in p.values()}
            return p if len(leaders) == 1 and len(ids) == 1 and \
                0 not in ids else None

        p = wait_for("one acting leader every master agrees on", settled)
        for name, s in p.items():
            assert value(s, "rt_master_raft_members", role="voter") == 3
            assert value(s, "rt_master_raft_term") >= 1
            assert value(s, "rt_master_commit_index") >= 1
            leader = value(s, "rt_master_leader") == 1
            assert value(s, "rt_master_raft_elected") == (1 if leader else 0)
            has_cluster = any(k[0] == "rt_master_servers" for k in s)
            assert has_cluster == leader, name
    finally:
        c.stop(check=False)
        c.check_sanitizers()
