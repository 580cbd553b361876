#!/usr/bin/python3
"""The fault harness's TCP proxy (docs/DESIGN-replication.md §11.3): one
forwarder per directed link, listen port -> target host:port, whose faults
are set at run time.

Contract:
- A link forwards every byte both ways, in order, until a fault is set.
- cut(mode="reset"): every open connection of the link is reset (RST) and
  each new one is accepted and reset at once.
- cut(mode="blackhole"): every open connection is reset; each new one is
  accepted and then never forwarded nor answered (the client waits until
  its own timeout), like a peer that vanished from the network.
- drop(): open and new connections stay up but no byte is forwarded any
  more, silently (a partition that keeps the sockets).
- delay(ms): each chunk is forwarded @ms after it was read (order kept).
- heal(): back to forwarding for new connections; a connection that lost
  bytes (blackholed or dropped) is reset, since its stream is broken.
- The target is looked up at each new connection (a (host, port) or a
  callable returning one or None), so a link can exist before the process
  it leads to has a port; with no target the connection is reset.
- Per source: a link made with a `classify` callable (the client's
  (host, port) -> a source name or None, called once per accepted
  connection on the proxy's loop) tags each connection with its source;
  cut(src=NAME) / heal(src=NAME) then apply to that source's connections
  only, so one process's path to a target can be cut while others keep
  theirs (cut's modes as above; a whole-link fault applies to every
  source).

In-process use (faults.py): Proxy() runs its asyncio loop on a daemon
thread; add_link() returns the listening port; cut/drop/delay/heal are
thread-safe and return once applied. Stand-alone: `fproxy.py --link
NAME=LPORT:HOST:PORT ... --control PORT` with a line protocol on the
control port: `cut NAME [reset|blackhole]`, `drop NAME`, `delay NAME MS`,
`heal NAME`, `list`; each answers one line, `ok ...` or `err ...`.
Standard library only.
"""

import argparse
import asyncio
import socket
import struct
import sys
import threading

CHUNK = 65536
CONNECT_TIMEOUT_S = 2.0


def _rst(writer):
    """Closes @writer's socket with an RST (SO_LINGER 0), not a FIN."""
    if writer is None:
        return
    sock = writer.get_extra_info("socket")
    try:
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                            struct.pack("ii", 1, 0))
    except OSError:
        pass
    writer.transport.abort()


class _Conn:
    """One client connection through a link and its upstream, if any."""

    def __init__(self, link, cw, src=None):
        self.link = link
        self.src = src        # the source name given by link.classify
        self.cw = cw          # client side writer
        self.uw = None        # upstream writer
        self.tainted = False  # some bytes were not forwarded
        self.closed = False
        self.tasks = []

    def reset(self):
        if self.closed:
            return
        self.closed = True
        _rst(self.cw)
        _rst(self.uw)
        for t in self.tasks:
            if t is not asyncio.current_task():
                t.cancel()
        self.link.conns.discard(self)


class Link:
    """One directed link: its listening server, state and connections."""

    def __init__(self, name, target, classify=None):
        self.name = name
        self.target = target
        self.classify = classify
        self.src_mode = {}    # source name -> reset | blackhole
        self.mode = "ok"      # ok | reset | blackhole
        self.dropping = False
        self.delay_ms = 0
        self.conns = set()
        self.server = None
        self.port = None
        self.accepted = 0

    def state(self):
        return {"name": self.name, "port": self.port, "mode": self.mode,
                "drop": self.dropping, "delay_ms": self.delay_ms,
                "conns": len(self.conns), "accepted": self.accepted,
                "src_mode": dict(self.src_mode)}

    def mode_of(self, conn):
        """The cut mode that applies to @conn: the link's, else its
        source's, else "ok"."""
        if self.mode != "ok":
            return self.mode
        return self.src_mode.get(conn.src, "ok")

    def _target(self):
        t = self.target() if callable(self.target) else self.target
        return t

    async def handle(self, reader, writer):
        self.accepted += 1
        src = None
        if self.classify is not None:
            try:
                src = self.classify(writer.get_extra_info("peername"))
            except Exception:  # noqa: BLE001 - unknown source
                src = None
        conn = _Conn(self, writer, src)
        self.conns.add(conn)
        conn.tasks.append(asyncio.current_task())
        try:
            mode = self.mode_of(conn)
            if mode == "reset":
                conn.reset()
                return
            if mode == "blackhole" or self.dropping:
                conn.tainted = True
                await self._sink(reader)
                return
            t = self._target()
            if t is None:
                conn.reset()
                return
            try:
                ur, uw = await asyncio.wait_for(
                    asyncio.open_connection(t[0], t[1]), CONNECT_TIMEOUT_S)
            except (OSError, asyncio.TimeoutError):
                conn.reset()
                return
            conn.uw = uw
            if conn.closed:  # cut while connecting
                _rst(uw)
                return
            up = asyncio.ensure_future(self._pump(conn, reader, uw))
            down = asyncio.ensure_future(self._pump(conn, ur, writer))
            conn.tasks += [up, down]
            await asyncio.gather(up, down, return_exceptions=True)
        except asyncio.CancelledError:
            pass
        finally:
            if not conn.closed:
                conn.closed = True
                for w in (conn.cw, conn.uw):
                    if w is not None:
                        w.transport.abort()
            self.conns.discard(conn)

    async def _sink(self, reader):
        """Reads and discards until the peer closes or we are cancelled."""
        while await reader.read(CHUNK):
            pass

    async def _pump(self, conn, reader, writer):
        """One direction: read, hold @delay_ms, write; drops bytes while
        the link drops; a FIN is passed on as a FIN."""
        queue = asyncio.Queue()
        loop = asyncio.get_running_loop()

        async def send():
            while True:
                due, data = await queue.get()
                wait = due - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                if data is None:
                    if writer.can_write_eof():
                        writer.write_eof()
                    return
                if self.dropping or self.mode_of(conn) != "ok":
                    conn.tainted = True
                    continue
                writer.write(data)
                await writer.drain()

        sender = asyncio.ensure_future(send())
        conn.tasks.append(sender)
        try:
            while True:
                data = await reader.read(CHUNK)
                due = loop.time() + self.delay_ms / 1000.0
                if not data:
                    queue.put_nowait((due, None))
                    break
                if self.dropping or self.mode_of(conn) != "ok":
                    conn.tainted = True
                    continue
                queue.put_nowait((due, data))
            await sender
        except (OSError, asyncio.CancelledError):
            sender.cancel()
            conn.reset()
        except Exception:  # noqa: BLE001 - a broken stream ends the conn
            sender.cancel()
            conn.reset()

    def cut(self, mode, src=None):
        if mode not in ("reset", "blackhole"):
            raise ValueError("cut mode %r" % mode)
        if src is None:
            self.mode = mode
        else:
            self.src_mode[src] = mode
        for c in list(self.conns):
            if src is not None and c.src != src:
                continue
            if c.uw is not None or mode == "reset":
                c.reset()

    def drop(self):
        self.dropping = True

    def heal(self, src=None):
        if src is not None:
            self.src_mode.pop(src, None)
            for c in list(self.conns):
                if c.src == src and c.tainted and self.mode_of(c) == "ok":
                    c.reset()
            return
        self.mode = "ok"
        self.src_mode.clear()
        self.dropping = False
        self.delay_ms = 0
        for c in list(self.conns):
            if c.tainted:
                c.reset()


class Proxy:
    """A set of links served by one asyncio loop on a daemon thread."""

    def __init__(self, host="127.0.0.1"):
        self.host = host
        self.links = {}
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name="fproxy",
                                       daemon=True)
        self.thread.start()
        self.control = None

    def _run(self):
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def _call(self, coro_or_fn, *args):
        async def wrap():
            r = coro_or_fn(*args)
            if asyncio.iscoroutine(r):
                r = await r
            return r
        return asyncio.run_coroutine_threadsafe(wrap(), self.loop).result()

    async def _add(self, name, target, port, classify):
        link = Link(name, target, classify)
        link.server = await asyncio.start_server(
            link.handle, self.host, port, reuse_address=True)
        link.port = link.server.sockets[0].getsockname()[1]
        self.links[name] = link
        return link.port

    def add_link(self, name, target, port=0, classify=None):
        """Starts forwarding @port (0: any free one) to @target; returns
        the port. @classify: see the module doc (per-source cuts)."""
        if name in self.links:
            raise ValueError("link %s exists" % name)
        return self._call(self._add, name, target, port, classify)

    def port(self, name):
        return self.links[name].port

    def cut(self, name, mode="reset", src=None):
        """Cuts link @name, or only its connections from source @src."""
        self._call(self.links[name].cut, mode, src)

    def drop(self, name):
        self._call(self.links[name].drop)

    def delay(self, name, ms):
        def f():
            self.links[name].delay_ms = int(ms)
        self._call(f)

    def heal(self, name, src=None):
        """Heals link @name, or only the cut of its source @src."""
        self._call(self.links[name].heal, src)

    def heal_all(self):
        for name in list(self.links):
            self.heal(name)

    def state(self, name):
        return self._call(self.links[name].state)

    async def _close(self):
        for link in self.links.values():
            link.server.close()
            for c in list(link.conns):
                c.reset()
        if self.control is not None:
            self.control.close()
        # Let every cancelled task finish here rather than be destroyed
        # pending when the loop stops.
        rest = [t for t in asyncio.all_tasks()
                if t is not asyncio.current_task()]
        for t in rest:
            t.cancel()
        await asyncio.gather(*rest, return_exceptions=True)

    def close(self):
        """Stops every link and the loop; open connections are reset."""
        if not self.loop.is_running():
            return
        self._call(self._close)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)

    # -------------------------------------------------- control socket
    def command(self, line):
        """One control command (see the module doc); returns the answer."""
        w = line.split()
        try:
            if not w:
                return "err empty"
            if w[0] == "list":
                return "ok " + " ".join(
                    "%s:%d:%s%s" % (n, ln.port, ln.mode,
                                    ":drop" if ln.dropping else "")
                    for n, ln in sorted(self.links.items()))
            link = self.links[w[1]]
            if w[0] == "cut":
                link.cut(w[2] if len(w) > 2 else "reset")
            elif w[0] == "drop":
                link.drop()
            elif w[0] == "delay":
                link.delay_ms = int(w[2])
            elif w[0] == "heal":
                link.heal()
            else:
                return "err unknown command %s" % w[0]
            return "ok"
        except (IndexError, KeyError, ValueError) as e:
            return "err %s" % e

    async def _control(self, reader, writer):
        try:
            while True:
                line = await reader.readline()
                if not line:
                    break
                writer.write((self.command(line.decode()) + "\n").encode())
                await writer.drain()
        except OSError:
            pass
        finally:
            writer.close()

    async def _start_control(self, port):
        self.control = await asyncio.start_server(
            self._control, self.host, port, reuse_address=True)
        return self.control.sockets[0].getsockname()[1]

    def start_control(self, port=0):
        """Serves the line protocol on @port; returns the port."""
        return self._call(self._start_control, port)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--link", action="append", default=[],
                    metavar="NAME=LPORT:HOST:PORT")
    ap.add_argument("--control", type=int, default=0)
    a = ap.parse_args(argv)
    p = Proxy()
    for spec in a.link:
        name, rest = spec.split("=", 1)
        lport, host, port = rest.split(":")
        print("%s %d" % (name, p.add_link(name, (host, int(port)),
                                          int(lport))), flush=True)
    print("control %d" % p.start_control(a.control), flush=True)
    try:
        p.thread.join()
    except KeyboardInterrupt:
        p.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
