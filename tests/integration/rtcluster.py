"""Integration-test harness: runs a real rangetable cluster.

Cluster(workdir, n_ps=3) starts rt-master, N rt-partition-server and one
rt-frontend from the build tree, each with its own data directory under
@workdir, an ephemeral loopback port (--port-file tells us which), and
stdout/stderr in files under @workdir/logs. It stops only the PIDs it
started, and check_sanitizers() fails on any AddressSanitizer /
UndefinedBehaviorSanitizer / LeakSanitizer report in their stderr.

Binaries come from $RT_BUILD_DIR (set by ctest to the CMake binary dir;
default: build/sanitize, then build/release, under the repository):
  master/rt-master, partition-server/rt-partition-server,
  frontend/rt-frontend, tools/rtctl (and tools/rt-inspect for inspect()).

Environment knobs: RT_LOG_LEVEL (passed as --log-level, default info),
RT_START_TIMEOUT (seconds, default 30).

Only the standard library is needed here; table_service_client() imports
azure.data.tables (Debian python3-azure) lazily.

    with Cluster(tmp_path) as c:          # start() ... stop()
        svc = c.table_service_client()
        svc.create_table("people")
        c.restart()                       # same data dirs and ports
        c.master_status()["servers"]
        c.rtctl("status", "--json")
    c.stop(); c.inspect("ps1")            # rt-inspect --json of a stopped server
    Cluster(tmp_path, replication_factor=1)  # master --replication-factor 1
                                             # (default: the master's, 3)
    Cluster(tmp_path, status_open=False)     # status needs the token too
    Every RPC connection is mutual TLS: rtctl cluster init makes a CA in
    @workdir/tls and each process gets --cluster-tls @workdir/tls/NAME
    (c.tls_node("rogue", "ps") issues more); cluster_tls=False passes
    --insecure-rpc instead.
    c.check_sanitizers()

Every cluster has an admin token (@workdir/admin.token, 0600, random),
passed to each master as --admin-token-file and to rtctl through
$RT_ADMIN_TOKEN_FILE in c.env; c.admin_headers() is the Authorization
header for a test's own requests. Masters also get --status-open unless
status_open=False, so a test or tool that only reads the status or
/metrics needs no token (test_admin_auth tests the closed default).
"""

import ctypes
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

DEV_ACCOUNT = "devstoreaccount1"
DEV_KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/"
           "K1SZFPTOtr/KBHBeksoGMGw==")

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

# What a sanitizer report looks like on stderr (redis check_sanitizer_errors,
# STYLE.md §8): ASan/LSan/TSan headers contain "Sanitizer", UBSan's lines
# "runtime error:".
SANITIZER_MARKERS = ("Sanitizer", "runtime error:")

STOP_TIMEOUT = 10.0

# Loopback only: never through an http_proxy from the environment.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class ClusterError(AssertionError):
    """A cluster process misbehaved (died, did not get ready, sanitizer)."""


def find_build_dir():
    d = os.environ.get("RT_BUILD_DIR")
    if d:
        return os.path.abspath(d)
    for cand in ("build/sanitize", "build/release", "build"):
        p = os.path.join(REPO_ROOT, cand)
        if os.path.exists(os.path.join(p, "master", "rt-master")):
            return p
    raise ClusterError("no build found: set RT_BUILD_DIR to a CMake build "
                       "directory holding master/rt-master")


def _set_pdeathsig():
    """Child side of fork: die with SIGTERM if the test process dies, so a
    killed pytest (ctest timeout) leaves no daemon behind."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except Exception:  # noqa: BLE001 - best effort only
        pass


def _read_port_file(path):
    """Returns {key: int(port)} from a `key=port` file, or None if absent.
    Writers rename a complete file into place, so a present file is whole."""
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        return None
    out = {}
    for line in text.splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            out[k.strip()] = int(v.strip())
    return out


def _free_port():
    """A TCP port free on 127.0.0.1 now (bound, read, released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tcp_open(port, host="127.0.0.1"):
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def _tail(path, n=30):
    try:
        with open(path, errors="replace") as f:
            lines = f.readlines()
    except FileNotFoundError:
        return "(no file %s)" % path
    return "".join(lines[-n:])


class Proc:
    """One daemon of the cluster: how to start it and what it did."""

    def __init__(self, cluster, name, binary, kind):
        self.cluster = cluster
        self.name = name          # "master", "ps1".., "frontend"
        self.binary = binary
        self.kind = kind          # "master" | "ps" | "frontend"
        self.popen = None
        self.generation = 0       # how many times started
        self.port_file = os.path.join(cluster.workdir, "run",
                                      name + ".ports")
        self.ports = {}           # from the port file of the last start
        self.fixed_ports = None   # ports to reuse on restart
        self.stdout_path = None
        self.stderr_path = None
        self.stderr_paths = []    # every generation's stderr
        self.exits = []           # (generation, returncode, expected)
        self.expect_death = False
        self.member_id = None     # a master of a Raft group: its id
        self.join = False         # ... started empty to be added (--join)

    @property
    def pid(self):
        return self.popen.pid if self.popen else None

    def running(self):
        return self.popen is not None and self.popen.poll() is None

    def args(self):
        return self._base_args() + self.cluster.tls_args(
            self.name, self.kind) + list(
            self.cluster.extra_args.get(self.kind, []))

    def _base_args(self):
        c = self.cluster
        fp = self.fixed_ports or {}
        if self.kind == "master":
            data = os.path.join(c.workdir, self.name)
            args = ["--listen", "127.0.0.1:%d" % fp.get("rpc", 0),
                    "--http", "127.0.0.1:%d" % fp.get("http", 0),
                    "--raft-listen", "127.0.0.1:%d" % fp.get("raft", 0),
                    "--data", data,
                    "--heartbeat-timeout-ms", str(c.heartbeat_timeout_ms),
                    "--admin-token-file", c.admin_token_file
                    ] + (["--status-open"] if c.status_open else []) + (
                        ["--replication-factor",
                          str(c.replication_factor)]
                         if c.replication_factor is not None else [])
            if self.join:
                args += ["--id", str(self.member_id), "--join"]
            elif c.n_masters > 1:
                args += ["--id", str(self.member_id), "--peers", c.peers]
                # Every initial member bootstraps its empty directory
                # once; never a directory that had state (amnesia).
                if not os.path.isdir(os.path.join(data, "raft")) and \
                        self.generation == 1:
                    args.append("--bootstrap")
            return args + [str(a) for a in c.master_args.get(self.name,
                                                             [])]
        if self.kind == "ps":
            args = ["--listen", "127.0.0.1:%d" % fp.get("rpc", 0),
                    "--master", c.ps_master.get(self.name,
                                                c.master_rpc_addrs),
                    "--data", os.path.join(c.workdir, self.name),
                    # metrics (GET /metrics), as every deployment runs it
                    "--http", "127.0.0.1:%d" % fp.get("http", 0)]
            if self.name in c.ps_advertise:
                args += ["--advertise", c.ps_advertise[self.name]]
            return args + [str(a) for a in c.ps_args.get(self.name, [])]
        return ["--listen", "127.0.0.1:%d" % fp.get("http", 0),
                "--master", c.fe_master or c.master_rpc_addrs,
                "--http", "127.0.0.1:%d" % fp.get("metrics", 0)]

    def start(self):
        assert not self.running(), "%s already running" % self.name
        c = self.cluster
        self.generation += 1
        self.expect_death = False
        base = os.path.join(c.logdir, "%s.%d" % (self.name, self.generation))
        self.stdout_path = base + ".stdout"
        self.stderr_path = base + ".stderr"
        self.stderr_paths.append(self.stderr_path)
        try:
            os.unlink(self.port_file)
        except FileNotFoundError:
            pass
        argv = [self.binary] + self.args() + [
            "--port-file", self.port_file, "--log-level", c.log_level]
        with open(self.stdout_path, "wb") as out, \
                open(self.stderr_path, "wb") as err:
            err.write(("# %s\n" % " ".join(argv)).encode())
            err.flush()
            self.popen = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                cwd=c.workdir, env=c.env, start_new_session=True,
                preexec_fn=_set_pdeathsig)
        self.ports = {}

    def wait_ports(self, deadline, keys):
        """Waits for the port file to name every key in @keys."""
        while True:
            p = _read_port_file(self.port_file)
            if p and all(k in p for k in keys):
                self.ports = p
                return p
            self.cluster._check_alive()
            if time.monotonic() > deadline:
                raise ClusterError("%s wrote no port file %s in time\n%s"
                                   % (self.name, self.port_file,
                                      self.describe()))
            time.sleep(0.05)

    def signal(self, sig):
        if self.running():
            self.popen.send_signal(sig)

    def reap(self, timeout=STOP_TIMEOUT):
        """Waits up to @timeout for the process, SIGKILLs it after, and
        records its exit status. Returns the status."""
        if self.popen is None:
            return None
        try:
            rc = self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            rc = self.popen.wait()
            self.exits.append((self.generation, rc, False, "SIGKILLed after "
                               "ignoring SIGTERM for %.0fs" % timeout))
            self.popen = None
            return rc
        self.exits.append((self.generation, rc, self.expect_death, ""))
        self.popen = None
        return rc

    def describe(self, n=30):
        state = ("running (pid %d)" % self.pid if self.running()
                 else "exited %s" % (self.popen.returncode
                                     if self.popen else "-"))
        return ("--- %s: %s; last lines of %s:\n%s"
                % (self.name, state, self.stderr_path,
                   _tail(self.stderr_path, n)))


class Cluster:
    """A master, @n_ps partition servers and one front end in @workdir."""

    def __init__(self, workdir, n_ps=3, build_dir=None, log_level=None,
                 heartbeat_timeout_ms=3000, start_timeout=None,
                 extra_args=None, replication_factor=None, masters=1,
                 status_open=True, cluster_tls=True):
        self.workdir = os.path.abspath(str(workdir))
        self.logdir = os.path.join(self.workdir, "logs")
        self.build_dir = build_dir or find_build_dir()
        self.n_ps = n_ps
        self.log_level = log_level or os.environ.get("RT_LOG_LEVEL", "info")
        self.heartbeat_timeout_ms = heartbeat_timeout_ms
        # Copies of each new range (the master's --replication-factor);
        # None leaves it to the master's default (3).
        self.replication_factor = (None if replication_factor is None
                                   else int(replication_factor))
        # {"master"|"ps"|"frontend": [flags...]} appended to that kind's
        # command line, e.g. {"master": ["--delete-grace-ms", "2000"]}.
        self.extra_args = dict(extra_args or {})
        # Per partition server (by name), set before start(): the master
        # address it dials ({"ps1": "127.0.0.1:P"}, default the master's
        # own) and the address it registers (--advertise, default its
        # listen address); the fault harness routes links through its
        # proxy with these.
        self.ps_master = {}
        self.ps_advertise = {}
        # The front end's --master, set before its start (default the
        # master's own address; a list in test_masters_list).
        self.fe_master = None
        # More arguments for one partition server (by name), read at each
        # start: a restart can change them ({"ps2": ["--map-size-mb", 1]}).
        self.ps_args = {}
        self.start_timeout = float(start_timeout or
                                   os.environ.get("RT_START_TIMEOUT", 30))
        self.account = DEV_ACCOUNT
        self.key = DEV_KEY
        b = self.build_dir
        self.bins = {
            "master": os.path.join(b, "master", "rt-master"),
            "ps": os.path.join(b, "partition-server", "rt-partition-server"),
            "frontend": os.path.join(b, "frontend", "rt-frontend"),
            "rtctl": os.path.join(b, "tools", "rtctl"),
        }
        for k, p in self.bins.items():
            if not os.access(p, os.X_OK):
                raise ClusterError("%s binary not found at %s (build the "
                                   "tree first)" % (k, p))
        env = dict(os.environ)
        env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
        env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
        env.pop("RT_MASTER_HTTP", None)  # rtctl gets --master-http from us
        self.env = env
        # Mutual TLS on every RPC connection: one CA per cluster
        # (workdir/tls, made by rtctl cluster init), a certificate per
        # process name, issued on first use (tls_args). cluster_tls=False
        # runs the RPC with --insecure-rpc instead.
        self.cluster_tls = cluster_tls
        self.tls_dir = os.path.join(self.workdir, "tls")

        # The admin token: kept across restarts of this cluster (its file
        # is made once, 0600 as the master wants).
        os.makedirs(self.workdir, exist_ok=True)
        self.status_open = bool(status_open)
        self.admin_token_file = os.path.join(self.workdir, "admin.token")
        if not os.path.exists(self.admin_token_file):
            fd = os.open(self.admin_token_file,
                         os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_hex(32) + "\n")
        with open(self.admin_token_file) as f:
            self.admin_token = f.read().strip()
        env["RT_ADMIN_TOKEN_FILE"] = self.admin_token_file
        env.pop("RT_ADMIN_TOKEN", None)

        # One master ("master") or a Raft group of N ("master1".."masterN",
        # ids 1..N) whose ports are chosen up front: each member's --peers
        # and every client's --master list name all of them.
        self.n_masters = int(masters)
        # More arguments for one master (by name), read at each start.
        self.master_args = {}
        # The raft address other members dial for a master (by name), when
        # not its own port (the fault harness puts a proxy in between);
        # set before start(), together with self.peers.
        self.raft_advertise = {}
        if self.n_masters == 1:
            self.masters = [Proc(self, "master", self.bins["master"],
                                 "master")]
        else:
            self.masters = [Proc(self, "master%d" % i, self.bins["master"],
                                 "master") for i in
                            range(1, self.n_masters + 1)]
            for i, m in enumerate(self.masters):
                m.member_id = i + 1
                m.fixed_ports = {k: _free_port()
                                 for k in ("rpc", "http", "raft")}
                m.ports = dict(m.fixed_ports)
            self.peers = ",".join("%d=127.0.0.1:%d" % (m.member_id,
                                                       m.fixed_ports["raft"])
                                  for m in self.masters)
        self.master = self.masters[0]
        self.pss = [Proc(self, "ps%d" % i, self.bins["ps"], "ps")
                    for i in range(1, n_ps + 1)]
        self.frontend = Proc(self, "frontend", self.bins["frontend"],
                             "frontend")
        for d in ["run", "logs"] + [m.name for m in self.masters] + \
                [p.name for p in self.pss]:
            os.makedirs(os.path.join(self.workdir, d), exist_ok=True)

    # ------------------------------------------------------------ TLS
    TLS_ROLES = {"master": "master", "ps": "ps", "frontend": "fe",
                 "fe": "fe", "admin": "admin"}

    def tls_node(self, name, kind):
        """The credentials directory of node @name (a process name, or any
        other, e.g. "rogue"), of kind master|ps|frontend|admin: the
        cluster's CA is made on first use, the node's certificate
        (CN ROLE:name) issued on first use."""
        role = self.TLS_ROLES[kind]
        d = os.path.join(self.tls_dir, name)
        if os.path.exists(os.path.join(d, "node.key")):
            return d
        rtctl = self.bins["rtctl"]
        if not os.path.exists(os.path.join(self.tls_dir, "ca.key")):
            argv = [rtctl, "cluster", "init", self.tls_dir,
                    "--masters", ",".join(m.name for m in self.masters),
                    "--partition-servers",
                    ",".join(p.name for p in self.pss),
                    "--frontends", self.frontend.name,
                    "--admin", "operator"]
            subprocess.run(argv, check=True, stdout=subprocess.DEVNULL,
                           env=self.env, timeout=60)
        if not os.path.exists(os.path.join(d, "node.key")):
            subprocess.run([rtctl, "cluster", "add-node", self.tls_dir,
                            role, name], check=True,
                           stdout=subprocess.DEVNULL, env=self.env,
                           timeout=60)
        return d

    def tls_args(self, name, kind):
        """The RPC security flags of process @name of @kind."""
        if not self.cluster_tls:
            return ["--insecure-rpc"]
        return ["--cluster-tls", self.tls_node(name, kind)]

    # ------------------------------------------------------------ processes
    @property
    def procs(self):
        """Start order: masters, partition servers, front end."""
        return self.masters + self.pss + [self.frontend]

    def proc(self, name):
        for p in self.procs:
            if p.name == name:
                return p
        raise KeyError(name)

    @property
    def master_rpc_addr(self):
        return "127.0.0.1:%d" % self.master.ports["rpc"]

    @property
    def master_rpc_addrs(self):
        """Every master's RPC address, comma-separated (--master)."""
        return ",".join("127.0.0.1:%d" % m.ports["rpc"]
                        for m in self.masters)

    @property
    def master_http_addr(self):
        return "127.0.0.1:%d" % self.master.ports["http"]

    @property
    def master_http_addrs(self):
        """Every master's HTTP address, comma-separated (rtctl)."""
        return ",".join("127.0.0.1:%d" % m.ports["http"]
                        for m in self.masters)

    @property
    def fe_port(self):
        return self.frontend.ports["http"]

    @property
    def fe_https_port(self):
        """The front end's HTTPS port: given extra_args={"frontend":
        ["--https-listen", "127.0.0.1:0", "--tls-cert", C, "--tls-key",
        K]}, its port file names it ("https=PORT"); else None."""
        return self.frontend.ports.get("https")

    @property
    def table_endpoint(self):
        return "http://127.0.0.1:%d/%s" % (self.fe_port, self.account)

    @property
    def connection_string(self):
        return ("DefaultEndpointsProtocol=http;AccountName=%s;AccountKey=%s;"
                "TableEndpoint=%s;" % (self.account, self.key,
                                       self.table_endpoint))

    def _check_alive(self):
        for p in self.procs:
            if p.popen is not None and p.popen.poll() is not None \
                    and not p.expect_death:
                raise ClusterError("%s exited with status %s during startup"
                                   "\n%s" % (p.name, p.popen.returncode,
                                             p.describe()))

    def start(self):
        """Starts every process and waits (bounded) until the master reports
        n_ps servers up and the front end accepts connections."""
        deadline = time.monotonic() + self.start_timeout
        try:
            for m in self.masters:
                m.start()
            for m in self.masters:
                m.wait_ports(deadline, ("rpc", "http", "raft"))
                m.fixed_ports = dict(m.ports)
            self._wait(deadline, "a master leader",
                       lambda: self._http_get_master("/api/status")[0]
                       == 200)
            for p in self.pss:
                p.start()
            for p in self.pss:
                p.wait_ports(deadline, ("rpc", "http"))
                p.fixed_ports = dict(p.ports)
            self.frontend.start()
            self.frontend.wait_ports(deadline, ("http", "metrics"))
            self.frontend.fixed_ports = dict(self.frontend.ports)
            self._wait(deadline, "front end port",
                       lambda: _tcp_open(self.fe_port))
            self._wait(deadline, "%d partition servers up" % self.n_ps,
                       self._all_servers_up)
        except BaseException:
            self.stop(check=False)
            raise
        return self

    def _wait(self, deadline, what, pred):
        last = None
        while True:
            try:
                if pred():
                    return
            except Exception as e:  # noqa: BLE001 - retried until deadline
                last = e
            self._check_alive()
            if time.monotonic() > deadline:
                raise ClusterError(
                    "timed out waiting for %s (last error: %r)\n%s"
                    % (what, last, self.describe()))
            time.sleep(0.1)

    def _all_servers_up(self):
        """True when every partition server we started is registered (by its
        advertised address) and up."""
        st = self.master_status()
        up = {s.get("addr") for s in st.get("servers", [])
              if s.get("state") == "up"}
        want = {self.ps_addr(p) for p in self.pss}
        return want <= up

    def ps_addr(self, p):
        """The address partition server @p registers with the master."""
        return self.ps_advertise.get(p.name,
                                     "127.0.0.1:%d" % p.ports["rpc"])

    def stop(self, check=True):
        """SIGTERM to the front end, then the partition servers, then the
        master; each gets STOP_TIMEOUT seconds before SIGKILL. With @check,
        raises if any process exited non-zero (a clean shutdown exits 0)."""
        groups = [[self.frontend], self.pss, self.masters]
        for g in groups:
            for p in g:
                p.signal(signal.SIGTERM)
            for p in g:
                p.reap()
        if check:
            self.check_exits()

    def restart(self):
        """Stops everything, then starts it again with the same data
        directories and the same ports (the master's RPC port must stay,
        so the servers find it; the front end's, so clients keep working)."""
        self.stop()
        self.start()

    def kill(self, name, sig=signal.SIGKILL):
        """Sends @sig to one process (by name: master, ps1.., frontend). A
        SIGKILL/SIGTERM/SIGINT death is then expected, not an error."""
        p = self.proc(name)
        if sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT):
            p.expect_death = True
        p.signal(sig)
        if sig == signal.SIGKILL:
            p.reap()

    def start_process(self, name, wait=True):
        """(Re)starts one stopped process on its previous ports."""
        p = self.proc(name)
        if p.running():
            p.signal(signal.SIGTERM)
            p.reap()
        p.start()
        deadline = time.monotonic() + self.start_timeout
        keys = {"master": ("rpc", "http", "raft"), "ps": ("rpc", "http"),
                "frontend": ("http", "metrics")}[p.kind]
        p.wait_ports(deadline, keys)
        if wait and p.kind == "ps":
            self._wait(deadline, "%s up" % name, self._all_servers_up)
        elif wait and p.kind == "frontend":
            self._wait(deadline, "front end port",
                       lambda: _tcp_open(self.fe_port))

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop(check=exc[0] is None)

    # ------------------------------------------------------------ clients
    def admin_headers(self):
        """The Authorization header the masters want (Bearer token)."""
        return {"Authorization": "Bearer " + self.admin_token}

    def _http_get_master(self, path):
        """GET @path from the first master that answers (a follower
        redirects to the leader; urllib follows the 307)."""
        last = None
        for m in self.masters:
            if not m.running() or "http" not in m.ports:
                continue
            url = urllib.request.Request(
                "http://127.0.0.1:%d%s" % (m.ports["http"], path),
                headers=self.admin_headers())
            try:
                with _OPENER.open(url, timeout=5) as r:
                    return r.status, r.read()
            except urllib.error.HTTPError as e:
                last = (e.code, e.read())
                if e.code != 503:
                    return last
            except OSError as e:
                last = (599, str(e).encode())
        return last or (599, b"no master running")

    def new_master(self, member_id):
        """A master Proc started empty with --join (not running yet; its
        ports chosen now): `rtctl master add ID RAFT_ADDR` makes it a
        member. Clients learn it only from a later start (their --master
        list is fixed)."""
        m = Proc(self, "master%d" % member_id, self.bins["master"], "master")
        m.member_id = member_id
        m.join = True
        m.fixed_ports = {k: _free_port() for k in ("rpc", "http", "raft")}
        m.ports = dict(m.fixed_ports)
        os.makedirs(os.path.join(self.workdir, m.name), exist_ok=True)
        self.masters.append(m)
        return m

    def master_leader(self):
        """The Proc of the master that leads now (by its status's
        "masters" array), or None."""
        for m in self.masters:
            if not m.running():
                continue
            url = urllib.request.Request(
                "http://127.0.0.1:%d/api/status" % m.ports["http"],
                headers=self.admin_headers())
            try:
                with _OPENER.open(url, timeout=5) as r:
                    st = json.loads(r.read())
            except (OSError, ValueError):
                continue
            for mem in st.get("masters", []):
                if mem.get("leader"):
                    for p in self.masters:
                        if mem.get("raft_addr") == self.raft_advertise.get(
                                p.name,
                                "127.0.0.1:%d" % p.ports.get("raft", -1)):
                            return p
        return None


    def wait_master_leader(self, exclude=None, timeout=15.0):
        """The leader Proc once one (not @exclude) is acting (its status
        answers 200), and the seconds it took; AssertionError after
        @timeout."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            p = self.master_leader()
            if p is not None and p is not exclude:
                code, _ = self._http_get_master("/api/status")
                if code == 200:
                    return p, time.monotonic() - t0
            time.sleep(0.05)
        raise AssertionError("no master leader within %.0f s" % timeout)
    def master_status(self, wait_s=5.0):
        """GET /api/status of the master (the leader), decoded. A master
        just (re)started answers 503 until it acts (its election, a
        barrier): that is waited for up to @wait_s."""
        end = time.monotonic() + wait_s
        while True:
            status, body = self._http_get_master("/api/status")
            if status == 200:
                return json.loads(body)
            if status not in (503, 599) or time.monotonic() > end:
                raise ClusterError("GET /api/status -> %d %r"
                                   % (status, body))
            time.sleep(0.05)

    def rtctl(self, *args, check=True, timeout=30):
        """Runs tools/rtctl with --master-http pointing at this cluster
        (and the admin token through $RT_ADMIN_TOKEN_FILE). Returns the
        CompletedProcess (text stdout/stderr)."""
        argv = [self.bins["rtctl"], "--master-http", self.master_http_addrs]
        argv += list(args)
        r = subprocess.run(argv, capture_output=True, text=True,
                           timeout=timeout, env=self.env)
        # rtctl is ours too: keep its stderr for check_sanitizers().
        if r.stderr:
            with open(os.path.join(self.logdir, "rtctl.stderr"), "a") as f:
                f.write("# %s\n%s" % (" ".join(argv), r.stderr))
        if check and r.returncode != 0:
            raise ClusterError("%s -> exit %d\nstdout:\n%s\nstderr:\n%s"
                               % (" ".join(argv), r.returncode, r.stdout,
                                  r.stderr))
        return r

    def inspect(self, name, *args, check=True, timeout=60):
        """Runs tools/rt-inspect --json on partition server @name's data
        directory (stop the server first: rt-inspect refuses a directory
        in use). Returns the decoded document (with check) or the
        CompletedProcess (check=False)."""
        binary = os.path.join(self.build_dir, "tools", "rt-inspect")
        argv = [binary, "--json"] + list(args) + [
            os.path.join(self.workdir, name)]
        r = subprocess.run(argv, capture_output=True, text=True,
                           timeout=timeout, env=self.env)
        if r.stderr:
            with open(os.path.join(self.logdir, "rtctl.stderr"), "a") as f:
                f.write("# %s\n%s" % (" ".join(argv), r.stderr))
        if not check:
            return r
        if r.returncode != 0:
            raise ClusterError("%s -> exit %d\nstdout:\n%s\nstderr:\n%s"
                               % (" ".join(argv), r.returncode, r.stdout,
                                  r.stderr))
        return json.loads(r.stdout)

    def table_service_client(self, key=None, **kw):
        """azure.data.tables.TableServiceClient for this cluster (@key
        overrides the account key, e.g. to test bad signatures). Timeouts
        and retries are shortened so a hung request fails a test in seconds
        rather than minutes; pass them in @kw to change."""
        from azure.data.tables import TableServiceClient
        kw.setdefault("connection_timeout", 5)
        kw.setdefault("read_timeout", 30)
        kw.setdefault("retry_total", 4)
        kw.setdefault("retry_backoff_factor", 0.5)
        if key is None:
            return TableServiceClient.from_connection_string(
                self.connection_string, **kw)
        from azure.core.credentials import AzureNamedKeyCredential
        return TableServiceClient(
            endpoint=self.table_endpoint,
            credential=AzureNamedKeyCredential(self.account, key), **kw)

    # ------------------------------------------------------------ checks
    def check_exits(self):
        """Fails if any process exited with a non-zero status that was not
        expected (clean shutdown on SIGTERM is exit 0)."""
        bad = []
        for p in self.procs:
            for gen, rc, expected, note in p.exits:
                if rc != 0 and not expected:
                    bad.append("%s (start #%d) exited %d %s; stderr %s"
                               % (p.name, gen, rc, note,
                                  p.stderr_paths[gen - 1]))
        if bad:
            raise ClusterError("unclean exits:\n  " + "\n  ".join(bad) +
                               "\n" + self.describe())

    def stderr_files(self):
        files = [f for p in self.procs for f in p.stderr_paths]
        extra = os.path.join(self.logdir, "rtctl.stderr")
        if os.path.exists(extra):
            files.append(extra)
        return files

    def check_sanitizers(self):
        """Fails with an excerpt if any stderr holds a sanitizer report."""
        reports = []
        for path in self.stderr_files():
            try:
                with open(path, errors="replace") as f:
                    lines = f.readlines()
            except FileNotFoundError:
                continue
            for i, line in enumerate(lines):
                if any(m in line for m in SANITIZER_MARKERS):
                    excerpt = "".join(lines[max(0, i - 2):i + 40])
                    reports.append("%s:%d:\n%s" % (path, i + 1, excerpt))
                    break
        if reports:
            raise ClusterError("sanitizer reports:\n\n" +
                               "\n\n".join(reports))

    def describe(self, n=30):
        return "\n".join(p.describe(n) for p in self.procs
                         if p.stderr_path)


def started(factory, name="cluster", **kw):
    """A started Cluster for a pytest fixture (`yield from started(...)`,
    @factory being tmp_path_factory, @kw Cluster's arguments): after the
    test it is stopped by PID and its daemons' exits and sanitizer reports
    are checked."""
    c = Cluster(factory.mktemp(name), **kw)
    sys.stderr.write("\n[rtcluster] logs in %s\n" % c.logdir)
    c.start()
    yield c
    c.stop(check=False)
    c.check_exits()
    c.check_sanitizers()
