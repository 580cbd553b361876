"""Network-namespace plumbing for tests that need several "hosts".

Topology(hosts, subnet) builds, with iproute2 only, a switch namespace
holding a bridge and one namespace per host, each joined to the bridge by
a veth pair (the host's end is "eth0", the switch's "v-HOST") and given a
private address of @subnet. Nothing is created in the caller's network
namespace: the addresses, routes and the bridge exist only inside the
namespaces, so a test cannot disturb the machine's own network.

With @domain, each namespace also gets /etc/netns/<ns>/hosts naming every
host "<host>.<domain>" (`ip netns exec` bind-mounts it over /etc/hosts
for what it runs), so programs in the namespaces can dial hosts by name.

Names are "<prefix><tag>-<host>" with a random 4-hex tag per run, so runs
side by side do not collide. The owner's PID is written to
/run/rtmh-netns/<tag>; create() first removes namespaces of the prefix
whose owner is no longer alive (a run killed before its teardown), and
teardown() (also registered with atexit) kills what runs in our
namespaces and deletes them. Interface names stay within IFNAMSIZ (15).

    topo = Topology(["m1", "fe1", "cl"], "10.231.0.0/24")
    topo.create()                       # or: with Topology(...) as topo:
    p = topo.popen("m1", ["rt-master", ...], stdout=f, stderr=f)
    topo.run("cl", ["ping", "-c1", topo.ip("m1")])
    topo.link_down("m1"); topo.link_up("m1")   # the host's cable, at the
                                               # switch port
    topo.teardown()

available() says whether namespaces can be made here (root, `ip`, the
kernel allowing it) and why not. Run this file to self-test (root).
"""

import atexit
import ctypes
import ipaddress
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time

PREFIX = "rtmh"
OWNER_DIR = "/run/rtmh-netns"
NETNS_ETC = "/etc/netns"
BRIDGE = "br0"


class NetnsError(RuntimeError):
    """An `ip` command failed."""


def _ip(*args, check=True, timeout=20):
    r = subprocess.run(["ip"] + list(args), capture_output=True, text=True,
                       timeout=timeout)
    if check and r.returncode != 0:
        raise NetnsError("ip %s -> exit %d: %s" % (" ".join(args),
                                                   r.returncode,
                                                   r.stderr.strip()))
    return r


def list_namespaces():
    r = _ip("netns", "list", check=False)
    return [line.split()[0] for line in r.stdout.splitlines() if line.strip()]


def available():
    """(True, "") when this process can create network namespaces, else
    (False, why)."""
    if os.geteuid() != 0:
        return False, "not root (euid %d)" % os.geteuid()
    if shutil.which("ip") is None:
        return False, "no `ip` command (install iproute2)"
    probe = "%sprobe%d" % (PREFIX, os.getpid())
    try:
        _ip("netns", "add", probe)
        _ip("netns", "exec", probe, "ip", "link", "set", "lo", "up")
    except (NetnsError, OSError, subprocess.SubprocessError) as e:
        return False, str(e)
    finally:
        _ip("netns", "del", probe, check=False)
    return True, ""


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_pids_in(ns):
    """SIGKILLs every process in namespace @ns (ours: we created it)."""
    r = _ip("netns", "pids", ns, check=False)
    for tok in r.stdout.split():
        try:
            os.kill(int(tok), signal.SIGKILL)
        except (ValueError, ProcessLookupError):
            pass


def cleanup_stale(prefix=PREFIX):
    """Deletes namespaces named @prefix<tag>-* whose owning run is gone
    (no owner file or a dead PID). Returns the names deleted."""
    gone = []
    for ns in list_namespaces():
        if not ns.startswith(prefix) or "-" not in ns:
            continue
        tag = ns[len(prefix):].split("-", 1)[0]
        owner = os.path.join(OWNER_DIR, tag)
        try:
            with open(owner) as f:
                pid = int(f.read().strip() or 0)
        except (OSError, ValueError):
            pid = 0
        if pid and _pid_alive(pid):
            continue
        _kill_pids_in(ns)
        _ip("netns", "del", ns, check=False)
        shutil.rmtree(os.path.join(NETNS_ETC, ns), ignore_errors=True)
        gone.append(ns)
    for name in os.listdir(OWNER_DIR) if os.path.isdir(OWNER_DIR) else []:
        if not any(ns.startswith(prefix + name + "-")
                   for ns in list_namespaces()):
            try:
                os.unlink(os.path.join(OWNER_DIR, name))
            except OSError:
                pass
    return gone


def _set_pdeathsig():
    """Child side of fork: SIGTERM when the test process dies (survives
    the exec of `ip netns exec` and of the daemon it execs)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)
    except Exception:  # noqa: BLE001 - best effort only
        pass


class Topology:
    """A bridge and one namespace per host name, on @subnet (the switch
    itself has no address; hosts get .11, .12, ... unless @addrs maps a
    host to its last octet)."""

    def __init__(self, hosts, subnet="10.231.0.0/24", addrs=None,
                 prefix=PREFIX, domain=None):
        self.prefix = prefix
        self.domain = domain
        self.tag = secrets.token_hex(2)
        self.net = ipaddress.ip_network(subnet)
        self.hosts = list(hosts)
        addrs = dict(addrs or {})
        base = list(self.net.hosts())
        self.addrs = {}
        for i, h in enumerate(self.hosts):
            self.addrs[h] = str(base[addrs.get(h, 10 + i) - 1])
        self.procs = []           # every Popen we started, in order
        self.created = []         # namespaces created, switch first
        self._atexit = False

    # names
    def ns(self, host):
        return "%s%s-%s" % (self.prefix, self.tag, host)

    @property
    def switch(self):
        return self.ns("sw")

    def ip(self, host):
        return self.addrs[host]

    def name(self, host):
        """@host's DNS name inside the namespaces (needs @domain)."""
        return "%s.%s" % (host, self.domain)

    def port_of(self, host):
        """The switch-side veth of @host (its cable)."""
        return ("v-" + host)[:15]

    # life cycle
    def create(self):
        cleanup_stale(self.prefix)
        os.makedirs(OWNER_DIR, exist_ok=True)
        with open(os.path.join(OWNER_DIR, self.tag), "w") as f:
            f.write(str(os.getpid()))
        if not self._atexit:
            atexit.register(self.teardown)
            self._atexit = True
        try:
            self._add_ns(self.switch)
            _ip("-n", self.switch, "link", "add", BRIDGE, "type", "bridge")
            _ip("-n", self.switch, "link", "set", BRIDGE, "up")
            for h in self.hosts:
                ns = self.ns(h)
                self._add_ns(ns)
                port = self.port_of(h)
                _ip("-n", self.switch, "link", "add", port, "type", "veth",
                    "peer", "name", "eth0", "netns", ns)
                _ip("-n", self.switch, "link", "set", port, "master",
                    BRIDGE)
                _ip("-n", self.switch, "link", "set", port, "up")
                _ip("-n", ns, "addr", "add", "%s/%d" % (self.ip(h),
                                                       self.net.prefixlen),
                    "dev", "eth0")
                _ip("-n", ns, "link", "set", "eth0", "up")
        except BaseException:
            self.teardown()
            raise
        return self

    def _add_ns(self, ns):
        _ip("netns", "add", ns)
        self.created.append(ns)
        _ip("-n", ns, "link", "set", "lo", "up")
        if self.domain:
            d = os.path.join(NETNS_ETC, ns)
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "hosts"), "w") as f:
                f.write("127.0.0.1 localhost\n")
                for h in self.hosts:
                    f.write("%s %s\n" % (self.ip(h), self.name(h)))

    def teardown(self):
        """Kills every process we started (by PID) and anything left in
        our namespaces, then deletes them. Safe to call twice."""
        for p in self.procs:
            if p.poll() is None:
                try:
                    p.send_signal(signal.SIGKILL)
                except ProcessLookupError:
                    pass
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
        for ns in reversed(self.created):
            _kill_pids_in(ns)
        for ns in reversed(self.created):
            _ip("netns", "del", ns, check=False)
            shutil.rmtree(os.path.join(NETNS_ETC, ns), ignore_errors=True)
        self.created = []
        try:
            os.unlink(os.path.join(OWNER_DIR, self.tag))
        except OSError:
            pass

    def __enter__(self):
        return self.create()

    def __exit__(self, *exc):
        self.teardown()

    # processes
    def argv(self, host, argv):
        return ["ip", "netns", "exec", self.ns(host)] + [str(a) for a in argv]

    def popen(self, host, argv, **kw):
        """Starts @argv in @host's namespace (`ip netns exec` execs it, so
        the Popen's PID is the program's). It dies with the test process."""
        kw.setdefault("stdin", subprocess.DEVNULL)
        kw.setdefault("start_new_session", True)
        kw.setdefault("preexec_fn", _set_pdeathsig)
        p = subprocess.Popen(self.argv(host, argv), **kw)
        self.procs.append(p)
        return p

    def run(self, host, argv, timeout=60, **kw):
        kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        return subprocess.run(self.argv(host, argv), timeout=timeout, **kw)

    # links
    def link_down(self, host):
        """Pulls @host's cable at the switch: its packets go nowhere, its
        connections hang (no RST), as when a host drops off the network."""
        _ip("-n", self.switch, "link", "set", self.port_of(host), "down")

    def link_up(self, host):
        _ip("-n", self.switch, "link", "set", self.port_of(host), "up")


def _selftest():
    ok, why = available()
    if not ok:
        print("skip: network namespaces unavailable: %s" % why)
        return 0
    topo = Topology(["a", "b"], "10.231.7.0/24", domain="rtmh.test")
    with topo:
        assert all(ns in list_namespaces() for ns in topo.created)
        # The caller's namespace has no route into the subnet.
        assert topo.ip("b") not in subprocess.run(
            ["ip", "addr"], capture_output=True, text=True).stdout
        srv = topo.popen("b", [sys.executable, "-c",
                               "import socket;s=socket.socket();"
                               "s.setsockopt(socket.SOL_SOCKET,"
                               "socket.SO_REUSEADDR,1);"
                               "s.bind(('%s',7000));s.listen();"
                               "c,_=s.accept();c.sendall(b'hi')"
                               % topo.ip("b")])
        conn = ("import socket,time,sys\n"
                "for i in range(50):\n"
                "  try:\n"
                "    s=socket.create_connection(('%s',7000),timeout=%s)\n"
                "    print(s.recv(2).decode()); sys.exit(0)\n"
                "  except OSError as e:\n"
                "    err=e; time.sleep(0.1)\n"
                "print('ERR', err); sys.exit(1)\n")
        # By name: /etc/netns/<ns>/hosts is the namespace's /etc/hosts.
        r = topo.run("a", [sys.executable, "-c", conn % (topo.name("b"), 2)])
        assert r.stdout.strip() == "hi", (r.stdout, r.stderr)
        srv.wait(timeout=5)
        topo.link_down("b")
        t0 = time.monotonic()
        r = topo.run("a", [sys.executable, "-c",
                           "import socket\ntry:\n socket.create_connection("
                           "('%s',7001),timeout=1)\nexcept OSError as e:\n"
                           " print(type(e).__name__)" % topo.ip("b")])
        assert "timeout" in r.stdout.lower(), r.stdout
        assert time.monotonic() - t0 >= 0.9
        topo.link_up("b")
        created = list(topo.created)
    left = [ns for ns in created if ns in list_namespaces() or
            os.path.exists(os.path.join(NETNS_ETC, ns))]
    assert not left, left
    # A leftover of a run that died (its owner PID gone) is cleaned by
    # the next create(); one whose owner lives is not.
    dead = subprocess.Popen(["true"])
    dead.wait()
    for tag, pid in (("dead", dead.pid), ("live", os.getpid())):
        _ip("netns", "add", "%s%s-x" % (PREFIX, tag))
        os.makedirs(OWNER_DIR, exist_ok=True)
        with open(os.path.join(OWNER_DIR, tag), "w") as f:
            f.write(str(pid))
    try:
        gone = cleanup_stale()
        assert "%sdead-x" % PREFIX in gone, gone
        assert "%slive-x" % PREFIX in list_namespaces()
        assert not os.path.exists(os.path.join(OWNER_DIR, "dead"))
    finally:
        _ip("netns", "del", "%slive-x" % PREFIX, check=False)
        _ip("netns", "del", "%sdead-x" % PREFIX, check=False)
        for tag in ("live", "dead"):
            try:
                os.unlink(os.path.join(OWNER_DIR, tag))
            except OSError:
                pass
    print("netns self-test ok")
    return 0


if __name__ == "__main__":
    sys.exit(_selftest())
