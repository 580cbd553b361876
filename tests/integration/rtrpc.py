"""Raw cluster RPC for tests: frames built by hand (common/rt_rpc.h), sent
over plain TCP or over TLS with a certificate of the test's choosing, so a
test can play an outsider (no credentials, a foreign CA) or a member of a
given role (a certificate from the cluster's CA, Cluster.tls_node).

    s = connect(addr, tls_dir=None)        # plain TCP
    s = connect(addr, tls_dir=c.tls_node("rogue", "fe"))
    s.sendall(frame(METHOD, body, rid=1))
    status, body = read_reply(s)           # None when the peer closed

Bodies use the protobuf wire format (varint, field_u64, field_bytes).
Standard library only.
"""

import socket
import ssl
import struct

MAGIC = 0x5254
F_REPLY = 1
HDR = struct.Struct(">IHBBIiQ")  # len, magic, version, flags, method,
                                 # status, id: 24 bytes


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field_u64(num, v):
    return varint(num << 3) + varint(v)


def field_bytes(num, b):
    if isinstance(b, str):
        b = b.encode()
    return varint((num << 3) | 2) + varint(len(b)) + b


def frame(method, body, rid, length=None):
    n = len(body) if length is None else length
    return HDR.pack(n, MAGIC, 1, 0, method, 0, rid) + body


def tls_context(tls_dir):
    """A client context presenting @tls_dir's node.crt/node.key. It trusts
    @tls_dir/ca.crt; a cluster server's certificate is checked against it
    only when it is that cluster's CA (a foreign-CA client skips the check
    so that the server is the one deciding)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    if tls_dir is not None:
        ctx.load_cert_chain(tls_dir + "/node.crt", tls_dir + "/node.key")
    return ctx


def connect(addr, tls_dir=None, tls=False, timeout=10):
    """A socket to @addr ("host:port"): plain TCP, or TLS presenting
    @tls_dir's certificate (tls=True and no tls_dir: TLS without any
    certificate). Raises OSError/ssl.SSLError when refused during the
    handshake."""
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=timeout)
    if tls_dir is None and not tls:
        return s
    try:
        return tls_context(tls_dir).wrap_socket(s)
    except BaseException:
        s.close()
        raise


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        try:
            chunk = s.recv(n - len(buf))
        except (ConnectionError, ssl.SSLError, ssl.SSLEOFError):
            return None
        if not chunk:
            return None
        buf += chunk
    return buf


def read_reply(s):
    """(status, body) of the next reply frame, or None when the peer closed
    the connection (or TLS failed: a refused certificate arrives as an
    alert on the first read under TLS 1.3)."""
    hdr = recv_exact(s, 24)
    if hdr is None:
        return None
    n, magic, ver, flags, _method, status, _rid = HDR.unpack(hdr)
    assert magic == MAGIC and ver == 1 and flags & F_REPLY
    body = recv_exact(s, n) if n else b""
    if body is None:
        return None
    return status, body


def call(addr, method, body, rid=1, tls_dir=None, tls=False, timeout=10):
    """One request on a fresh connection: (status, body), or None when the
    connection was refused or closed before a reply."""
    try:
        s = connect(addr, tls_dir=tls_dir, tls=tls, timeout=timeout)
    except (OSError, ssl.SSLError):
        return None
    with s:
        try:
            s.sendall(frame(method, body, rid))
        except (OSError, ssl.SSLError):
            return None
        return read_reply(s)
