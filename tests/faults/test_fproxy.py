"""fproxy.py on real loopback sockets: forwarding both ways, cut (reset and
blackhole), drop, heal, delay and the control socket (pytest)."""

import os
import socket
import sys
import threading
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import fproxy  # noqa: E402


class Echo:
    """A TCP echo server on loopback, one thread per connection."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._echo, args=(c,),
                             daemon=True).start()

    @staticmethod
    def _echo(c):
        with c:
            try:
                while True:
                    d = c.recv(65536)
                    if not d:
                        return
                    c.sendall(d)
            except OSError:
                return

    def close(self):
        self.sock.close()


@pytest.fixture
def env():
    echo = Echo()
    px = fproxy.Proxy()
    port = px.add_link("a", ("127.0.0.1", echo.port))
    yield px, port, echo
    px.close()
    echo.close()


def connect(port, timeout=2.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.settimeout(timeout)
    return s


def roundtrip(s, data):
    s.sendall(data)
    got = b""
    while len(got) < len(data):
        d = s.recv(65536)
        if not d:
            break
        got += d
    return got


def dead(s):
    """True when @s is reset or closed by the far end."""
    try:
        s.sendall(b"x")
        return s.recv(10) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True


def new_conn_dead(port):
    """True when a new connection to @port is reset or closed; the reset
    may already reach connect() on loopback."""
    try:
        s = connect(port)
    except ConnectionResetError:
        return True
    with s:
        return dead(s)


def test_bytes_pass_both_ways(env):
    px, port, _ = env
    s = connect(port)
    assert roundtrip(s, b"hello") == b"hello"
    big = os.urandom(1 << 20)
    assert roundtrip(s, big) == big
    s.close()


def test_cut_reset_closes_open_and_new(env):
    px, port, _ = env
    s = connect(port)
    assert roundtrip(s, b"a") == b"a"
    px.cut("a", "reset")
    assert dead(s)
    assert new_conn_dead(port)
    assert px.state("a")["conns"] == 0


def test_blackhole_stalls_new_connections(env):
    px, port, echo = env
    s = connect(port)
    assert roundtrip(s, b"a") == b"a"
    px.cut("a", "blackhole")
    assert dead(s)  # the open connection is reset
    before = echo.accepted
    s2 = connect(port, timeout=0.5)  # accepted ...
    s2.sendall(b"ping")
    with pytest.raises(socket.timeout):  # ... and never answered
        s2.recv(10)
    assert echo.accepted == before  # nothing reached the target
    s2.close()


def test_drop_stalls_open_connections(env):
    px, port, _ = env
    s = connect(port, timeout=0.5)
    assert roundtrip(s, b"a") == b"a"
    px.drop("a")
    s.sendall(b"lost")
    with pytest.raises(socket.timeout):
        s.recv(10)
    px.heal("a")
    assert dead(s)  # its stream lost bytes: reset on heal


def test_heal_restores_new_connections(env):
    px, port, _ = env
    for mode in ("reset", "blackhole"):
        px.cut("a", mode)
        px.heal("a")
        s = connect(port)
        assert roundtrip(s, b"back") == b"back"
        s.close()


def test_heal_resets_blackholed_connections(env):
    px, port, _ = env
    px.cut("a", "blackhole")
    s = connect(port, timeout=0.5)
    s.sendall(b"ping")
    time.sleep(0.1)
    px.heal("a")
    assert dead(s)


def test_delay_delays(env):
    px, port, _ = env
    s = connect(port)
    t = time.monotonic()
    assert roundtrip(s, b"x") == b"x"
    fast = time.monotonic() - t
    px.delay("a", 200)
    t = time.monotonic()
    assert roundtrip(s, b"y") == b"y"
    slow = time.monotonic() - t
    # 200 ms each way
    assert slow >= 0.39 and fast < 0.2, (fast, slow)
    px.heal("a")
    t = time.monotonic()
    assert roundtrip(s, b"z") == b"z"
    assert time.monotonic() - t < 0.2


def test_no_target_resets():
    px = fproxy.Proxy()
    try:
        port = px.add_link("b", lambda: None)
        assert new_conn_dead(port)
    finally:
        px.close()


def test_target_is_looked_up_per_connection(env):
    px, _, echo = env
    where = {}
    port = px.add_link("late", lambda: where.get("t"))
    assert new_conn_dead(port)
    where["t"] = ("127.0.0.1", echo.port)
    s = connect(port)
    assert roundtrip(s, b"now") == b"now"
    s.close()


def test_control_socket(env):
    px, port, _ = env
    cport = px.start_control()
    c = connect(cport)
    f = c.makefile("rw")

    def cmd(line):
        f.write(line + "\n")
        f.flush()
        return f.readline().strip()

    assert cmd("cut a blackhole") == "ok"
    assert px.state("a")["mode"] == "blackhole"
    assert cmd("delay a 5") == "ok"
    assert cmd("heal a") == "ok"
    assert px.state("a")["mode"] == "ok"
    assert cmd("list").startswith("ok a:%d:ok" % port)
    assert cmd("cut nosuch").startswith("err")
    assert cmd("frobnicate a").startswith("err")
    c.close()


def test_cut_by_source(env):
    """A classified link cuts one source's connections and keeps the
    others', before and after the cut began; heal(src) restores it."""
    px, _, echo = env
    srcs = {}
    port = px.add_link("c", ("127.0.0.1", echo.port),
                       classify=lambda peer: srcs.get(peer[1]))

    def conn_as(name):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        srcs[s.getsockname()[1]] = name
        s.settimeout(2.0)
        try:
            s.connect(("127.0.0.1", port))
        except ConnectionResetError:
            s.close()
            return None
        return s

    a, b = conn_as("A"), conn_as("B")
    assert roundtrip(a, b"a") == b"a" and roundtrip(b, b"b") == b"b"
    px.cut("c", "reset", src="A")
    assert dead(a)
    assert roundtrip(b, b"still") == b"still"
    a2 = conn_as("A")
    assert a2 is None or dead(a2)
    b2 = conn_as("B")
    assert roundtrip(b2, b"new") == b"new"
    assert px.state("c")["src_mode"] == {"A": "reset"}
    px.heal("c", src="A")
    a3 = conn_as("A")
    assert roundtrip(a3, b"back") == b"back"
    for s in (b, b2, a3):
        s.close()
