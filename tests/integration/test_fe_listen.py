"""The front end's listening sockets (frontend/fe_http.c, fe__listen).

Each worker has its own listening socket on the address (SO_REUSEPORT),
so the kernel spreads new connections over the workers instead of the
first worker to wake up accepting a whole burst. Checked on a real front
end with its default two workers:

- its port has two listening sockets;
- 64 connections opened while it is stopped (SIGSTOP) wait in the accept
  queues of both sockets, not of one (all 64 on one socket by chance:
  2^-63), and once it runs again each of them is served a signed GET;
- a second front end asked for the same port is refused ("Address already
  in use", exit 2 or 1) instead of silently sharing it, and so is one
  with a single worker.
"""

import os
import signal
import socket
import subprocess
import time

import pytest

import rawhttp
from rtcluster import started

TABLE = "listen"
N = 64


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from started(tmp_path_factory, n_ps=1, replication_factor=1)


@pytest.fixture(scope="module")
def env(cluster):
    rawhttp.seed_entity(cluster.fe_port, TABLE, "p", "r", {"v": "x"})
    return cluster


def listen_queues(port):
    """Accept-queue length of each IPv4 listening socket on @port
    (/proc/net/tcp: state 0A is LISTEN; for a listener rx_queue is the
    number of connections waiting to be accepted)."""
    out = []
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            fields = line.split()
            local, st, queues = fields[1], fields[3], fields[4]
            if st == "0A" and int(local.split(":")[1], 16) == port:
                out.append(int(queues.split(":")[1], 16))
    return out


def wait_stopped(pid, timeout=5.0):
    """Waits until every thread of @pid is stopped (SIGSTOP is delivered
    asynchronously: a worker could still accept a connection)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        states = []
        for tid in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                states.append(f.read().rsplit(")", 1)[1].split()[0])
        if all(st == "T" for st in states):
            return
        time.sleep(0.01)
    raise AssertionError("process %d did not stop" % pid)


def test_one_listening_socket_per_worker(env):
    assert len(listen_queues(env.fe_port)) == 2


def test_a_burst_of_connections_reaches_both_workers(env):
    pid = env.frontend.pid
    socks = []
    os.kill(pid, signal.SIGSTOP)
    try:
        wait_stopped(pid)
        for _ in range(N):
            socks.append(socket.create_connection(("127.0.0.1", env.fe_port),
                                                  timeout=10))
        end = time.monotonic() + 5
        while sum(listen_queues(env.fe_port)) < N and time.monotonic() < end:
            time.sleep(0.05)
        queues = listen_queues(env.fe_port)
    finally:
        os.kill(pid, signal.SIGCONT)
    try:
        assert len(queues) == 2 and sum(queues) == N, queues
        assert min(queues) > 0, queues
        req = rawhttp.signed_get(env.fe_port, TABLE, "p", "r")
        for s in socks:
            s.sendall(req)
        for s in socks:
            resp, _ = rawhttp.read_response(s)
            assert resp.status == 200, resp
            assert resp.json()["v"] == "x"
    finally:
        for s in socks:
            s.close()


@pytest.mark.parametrize("threads", ["2", "1"])
def test_second_front_end_on_the_same_port_is_refused(env, tmp_path, threads):
    p = subprocess.run(
        [env.bins["frontend"], "--listen", "127.0.0.1:%d" % env.fe_port,
         "--master", env.master_rpc_addr, "--threads", threads,
         "--port-file", str(tmp_path / "ports")] +
        env.tls_args(env.frontend.name, "frontend"),
        capture_output=True, text=True, timeout=30)
    assert p.returncode != 0, p.stderr
    assert "Address already in use" in p.stderr, p.stderr
    # The first front end still serves, on both of its sockets.
    assert len(listen_queues(env.fe_port)) == 2
    c = rawhttp.Client(env.fe_port)
    try:
        r = c.get(c.path(rawhttp.entity_path(TABLE, "p", "r")))
        assert r.status == 200, r
    finally:
        c.close()
