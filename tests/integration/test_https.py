"""HTTPS on the front end, and accounts reloaded from a file on SIGHUP.

One cluster (one partition server, one copy) whose front end serves plain
HTTP and HTTPS side by side (--https-listen, a server certificate signed by
a CA made here with python3-cryptography), the development account and an
accounts file, and logs at debug level. Checked through the official Python
SDK (azure-data-tables, `DefaultEndpointsProtocol=https` with
connection_verify=CA) and raw TLS sockets:
  - every kind of operation over https (tables, upsert, filter, $batch, SAS)
    and the absolute URLs of responses (Location, odata.metadata, odata.id,
    $batch parts) say https:// on the HTTPS listener, http:// on the other;
    a SAS with spr=https works only over TLS;
  - TLS 1.2 and 1.3 only; plain HTTP sent to the HTTPS port is closed and
    hurts nobody;
  - SIGHUP puts a new certificate in service for new connections while an
    open keep-alive connection goes on, rotations under load fail no
    request; a bad certificate on SIGHUP is logged and the old one stays;
    a key file others can read is refused; HTTPS alone (--listen "");
  - SIGHUP reloads the accounts file: an account added works without a
    restart, a removed one gets 403 AuthenticationFailed, key rotation
    through key2 fails no request, a malformed or world-readable file keeps
    the accounts in service; a world-readable (or foreign) file is refused
    at start;
  - no key, SharedKey signature or SAS sig appears in the logs.
"""

import base64
import datetime
import http.client
import ipaddress
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse
import warnings

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rtcluster import DEV_ACCOUNT, DEV_KEY, Cluster  # noqa: E402
import rawhttp  # noqa: E402

x509 = pytest.importorskip("cryptography.x509")
from cryptography.hazmat.primitives import hashes, serialization  # noqa
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.x509.oid import NameOID  # noqa: E402

UTC = datetime.timezone.utc
KEY_A1 = base64.b64encode(b"a1" * 32).decode()
KEY_A2 = base64.b64encode(b"a2" * 32).decode()
KEY_B = base64.b64encode(b"bb" * 32).decode()


# ------------------------------------------------------------ certificates
def _name(cn):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_ca():
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(UTC)
    cert = (x509.CertificateBuilder()
            .subject_name(_name("rangetable test CA"))
            .issuer_name(_name("rangetable test CA"))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0),
                           critical=True)
            .sign(key, hashes.SHA256()))
    return key, cert


def make_server_cert(ca, serial):
    ca_key, ca_cert = ca
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(UTC)
    cert = (x509.CertificateBuilder()
            .subject_name(_name("127.0.0.1"))
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(serial)
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                 x509.DNSName("localhost")]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    key_pem = key.private_bytes(serialization.Encoding.PEM,
                                serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def write_private(path, data, mode=0o600):
    """Writes @path whole (temp file + rename, as an operator's tooling
    would), with @mode."""
    tmp = path + ".tmp"
    if isinstance(data, str):
        data = data.encode()
    with open(tmp, "wb") as f:
        f.write(data)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


# ------------------------------------------------------------ fixtures
class Env:
    pass


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    wd = str(tmp_path_factory.mktemp("https"))
    e = Env()
    e.dir = wd
    e.ca = make_ca()
    e.ca_path = os.path.join(wd, "ca.pem")
    with open(e.ca_path, "wb") as f:
        f.write(e.ca[1].public_bytes(serialization.Encoding.PEM))
    e.cert_path = os.path.join(wd, "server.pem")
    e.key_path = os.path.join(wd, "server.key")
    e.serial = 1001
    cert, key = make_server_cert(e.ca, e.serial)
    write_private(e.cert_path, cert, 0o644)
    write_private(e.key_path, key)
    e.accounts_path = os.path.join(wd, "accounts")
    write_private(e.accounts_path, "# test accounts\nacctone %s\n" % KEY_A1)
    e.c = Cluster(wd, n_ps=1, replication_factor=1, log_level="debug",
                  extra_args={"frontend": [
                      "--https-listen", "127.0.0.1:0",
                      "--tls-cert", e.cert_path, "--tls-key", e.key_path,
                      "--accounts", e.accounts_path]})
    sys.stderr.write("\n[rtcluster] logs in %s\n" % e.c.logdir)
    e.c.start()
    assert e.c.fe_https_port, e.c.frontend.ports
    yield e
    e.c.stop(check=False)
    e.c.check_exits()
    e.c.check_sanitizers()


def ssl_ctx(env, **kw):
    ctx = ssl.create_default_context(cafile=env.ca_path)
    for k, v in kw.items():
        setattr(ctx, k, v)
    return ctx


def https_conn_str(env, account=DEV_ACCOUNT, key=DEV_KEY):
    return ("DefaultEndpointsProtocol=https;AccountName=%s;AccountKey=%s;"
            "TableEndpoint=https://127.0.0.1:%d/%s;"
            % (account, key, env.c.fe_https_port, account))


def https_service(env, account=DEV_ACCOUNT, key=DEV_KEY, **kw):
    from azure.data.tables import TableServiceClient
    kw.setdefault("retry_total", 0)
    kw.setdefault("connection_timeout", 5)
    return TableServiceClient.from_connection_string(
        https_conn_str(env, account, key), connection_verify=env.ca_path,
        **kw)


def fe_log(env):
    out = []
    for p in env.c.frontend.stderr_paths:
        with open(p, errors="replace") as f:
            out.append(f.read())
    return "".join(out)


def hup(env):
    env.c.frontend.signal(signal.SIGHUP)


def wait_for(pred, what, timeout=10.0):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.1)


def wait_log(env, text, timeout=10.0):
    return wait_for(lambda: text in fe_log(env), "log line %r" % text,
                    timeout)


def peer_serial(env, sock):
    der = sock.getpeercert(binary_form=True)
    return x509.load_der_x509_certificate(der).serial_number


def new_conn_serial(env):
    with socket.create_connection(("127.0.0.1", env.c.fe_https_port),
                                  timeout=5) as raw:
        with ssl_ctx(env).wrap_socket(raw,
                                      server_hostname="127.0.0.1") as s:
            return peer_serial(env, s)


# ------------------------------------------------------------ HTTPS
def test_sdk_over_https(env):
    """Tables, upsert, filtered query, $batch and a point read through the
    official SDK with an https connection string, verifying our CA."""
    from azure.data.tables import UpdateMode
    svc = https_service(env)
    tc = svc.create_table("tlstable")
    tc.upsert_entity({"PartitionKey": "p", "RowKey": "1", "n": 1})
    tc.upsert_entity({"PartitionKey": "p", "RowKey": "2", "n": 2},
                     mode=UpdateMode.REPLACE)
    got = list(tc.query_entities("n gt 1"))
    assert [e["RowKey"] for e in got] == ["2"]
    tc.submit_transaction([
        ("create", {"PartitionKey": "b", "RowKey": "1"}),
        ("upsert", {"PartitionKey": "b", "RowKey": "2", "x": "y"}),
    ])
    assert tc.get_entity("b", "2")["x"] == "y"
    assert "tlstable" in [t.name for t in svc.list_tables()]
    # The same data over plain HTTP: one service, two listeners.
    plain = env.c.table_service_client()
    assert plain.get_table_client("tlstable").get_entity("p", "1")["n"] == 1


def test_absolute_urls_say_https(env):
    """Location, odata.metadata, odata.id and the $batch parts' Location
    are https:// on the HTTPS listener and http:// on the HTTP one."""
    for port, ctx, scheme in ((env.c.fe_https_port, ssl_ctx(env), "https"),
                              (env.c.fe_port, None, "http")):
        cl = rawhttp.Client(port, ssl_context=ctx)
        root = "%s://127.0.0.1:%d/%s" % (scheme, port, DEV_ACCOUNT)
        name = "urls" + scheme
        r = cl.post(cl.path("/Tables"), {"TableName": name})
        assert r.status == 201, r
        assert r.header("Location") == "%s/Tables('%s')" % (root, name), r
        assert r.json()["odata.metadata"].startswith(root + "/$metadata"), r
        r = cl.post(cl.path("/" + name), {"PartitionKey": "a",
                                          "RowKey": "b"},
                    accept=rawhttp.JSON_FULL)
        assert r.status == 201, r
        assert r.header("Location").startswith(root + "/" + name + "("), r
        assert r.json()["odata.id"].startswith(root + "/" + name + "("), r
        # $batch: one insert; its part carries a Location of our scheme.
        body = batch_body(root, name)
        r = cl.post(cl.path("/$batch"), body,
                    content_type="multipart/mixed; boundary=batch_b1")
        assert r.status == 202, r
        text = r.body.decode()
        assert "201 Created" in text, text
        assert "Location: %s/%s(" % (root, name) in text, text
        other = "http://" if scheme == "https" else "https://"
        assert other not in text, text
        cl.close()


def batch_body(root, table):
    ent = '{"PartitionKey":"bp","RowKey":"br"}'
    return ("--batch_b1\r\n"
            "Content-Type: multipart/mixed; boundary=changeset_c1\r\n\r\n"
            "--changeset_c1\r\n"
            "Content-Type: application/http\r\n"
            "Content-Transfer-Encoding: binary\r\n\r\n"
            "POST %s/%s HTTP/1.1\r\n"
            "Content-Type: application/json\r\n"
            "Accept: application/json;odata=minimalmetadata\r\n"
            "Content-Length: %d\r\n\r\n%s\r\n"
            "--changeset_c1--\r\n"
            "--batch_b1--\r\n" % (root, table, len(ent), ent))


def test_sas_over_https(env):
    """A table SAS made by the SDK works over https; one restricted to
    https (spr=https) is refused over http with
    AuthorizationProtocolMismatch."""
    from azure.core.credentials import AzureNamedKeyCredential
    from azure.core.credentials import AzureSasCredential
    from azure.core.exceptions import HttpResponseError
    from azure.data.tables import (TableClient, TableSasPermissions,
                                   generate_table_sas)
    https_service(env).create_table("sastls")
    cred = AzureNamedKeyCredential(DEV_ACCOUNT, DEV_KEY)
    sas = generate_table_sas(
        cred, "sastls", permission=TableSasPermissions(read=True, add=True),
        expiry=datetime.datetime.now(UTC) + datetime.timedelta(hours=1),
        protocol="https")
    assert "spr=https" in sas
    tc = TableClient(endpoint="https://127.0.0.1:%d/%s"
                     % (env.c.fe_https_port, DEV_ACCOUNT),
                     table_name="sastls", credential=AzureSasCredential(sas),
                     connection_verify=env.ca_path, retry_total=0)
    tc.create_entity({"PartitionKey": "s", "RowKey": "1"})
    assert tc.get_entity("s", "1")["RowKey"] == "1"
    plain = TableClient(endpoint=env.c.table_endpoint, table_name="sastls",
                        credential=AzureSasCredential(sas), retry_total=0)
    with pytest.raises(HttpResponseError) as ei:
        plain.get_entity("s", "1")
    assert ei.value.status_code == 403
    assert ei.value.error_code == "AuthorizationProtocolMismatch"


def test_tls_versions(env):
    """TLS 1.3 and 1.2 are served; TLS 1.1 is refused at the handshake."""
    for ver in (ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_2):
        ctx = ssl_ctx(env, minimum_version=ver, maximum_version=ver)
        with socket.create_connection(("127.0.0.1", env.c.fe_https_port),
                                      timeout=5) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                assert s.version() == {ssl.TLSVersion.TLSv1_3: "TLSv1.3",
                                       ssl.TLSVersion.TLSv1_2: "TLSv1.2"}[ver]
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(env.ca_path)
    try:
        with warnings.catch_warnings():  # deprecated: that is the point
            warnings.simplefilter("ignore", DeprecationWarning)
            ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
            ctx.minimum_version = ssl.TLSVersion.TLSv1_1
            ctx.maximum_version = ssl.TLSVersion.TLSv1_1
    except (ValueError, ssl.SSLError):
        pytest.skip("this OpenSSL cannot offer TLS 1.1")
    with socket.create_connection(("127.0.0.1", env.c.fe_https_port),
                                  timeout=5) as raw:
        with pytest.raises((ssl.SSLError, ConnectionResetError, OSError)):
            ctx.wrap_socket(raw, server_hostname="127.0.0.1")


def test_plain_http_to_https_port(env):
    """Plain HTTP on the HTTPS port gets the connection closed (no hang,
    no HTTP answer), a hundred times over; the daemon goes on serving."""
    req = (b"GET /devstoreaccount1/Tables HTTP/1.1\r\n"
           b"Host: 127.0.0.1\r\n\r\n")
    for _ in range(100):
        with socket.create_connection(("127.0.0.1", env.c.fe_https_port),
                                      timeout=5) as s:
            s.sendall(req)
            data = b""
            try:
                while True:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    data += chunk
            except ConnectionResetError:
                pass
            assert not data.startswith(b"HTTP/"), data
    assert env.c.frontend.running()
    assert "tlstable" in [t.name for t in https_service(env).list_tables()]


def test_cert_rotation_on_sighup(env):
    """SIGHUP with a new certificate: new connections see its serial, a
    keep-alive connection opened before goes on working; then a bad
    certificate (not matching the key) and a key others can read are
    refused on SIGHUP and the good certificate stays."""
    old = rawhttp.Client(env.c.fe_https_port, ssl_context=ssl_ctx(env))
    assert old.get(old.path("/Tables")).status == 200
    assert peer_serial(env, old.conn.sock) == env.serial
    assert new_conn_serial(env) == env.serial

    cert2, key2 = make_server_cert(env.ca, env.serial + 1)
    write_private(env.key_path, key2)
    write_private(env.cert_path, cert2, 0o644)
    hup(env)
    # Every worker (a new connection lands on any) serves the new one.
    wait_for(lambda: new_conn_serial(env) == env.serial + 1,
             "the new certificate")
    for _ in range(8):
        assert new_conn_serial(env) == env.serial + 1
    sock_before = old.conn.sock
    for _ in range(3):
        assert old.get(old.path("/Tables")).status == 200
    assert old.conn.sock is sock_before  # the same TLS session throughout
    assert peer_serial(env, old.conn.sock) == env.serial
    old.close()
    env.serial += 1
    # The SDK on a new connection, after the rotation.
    assert "tlstable" in [t.name for t in https_service(env).list_tables()]

    # A certificate that is not the key's: logged, the old one stays.
    cert3, _ = make_server_cert(env.ca, env.serial + 1)
    write_private(env.cert_path, cert3, 0o644)
    hup(env)
    wait_log(env, "is not the key of the first certificate")
    assert "the certificate in service stays" in fe_log(env)
    for _ in range(4):
        assert new_conn_serial(env) == env.serial
    # Garbage in the certificate file: the same.
    write_private(env.cert_path, b"-----BEGIN CERTIFICATE-----\nnope\n",
                  0o644)
    hup(env)
    wait_log(env, "no PEM certificate")
    assert new_conn_serial(env) == env.serial
    # A good pair whose key file others can read: refused.
    cert4, key4 = make_server_cert(env.ca, env.serial + 2)
    write_private(env.key_path, key4, 0o644)
    write_private(env.cert_path, cert4, 0o644)
    hup(env)
    wait_log(env, "group/other may access the private key")
    assert new_conn_serial(env) == env.serial
    # Fixed: in service.
    os.chmod(env.key_path, 0o600)
    hup(env)
    wait_for(lambda: new_conn_serial(env) == env.serial + 2,
             "the fixed certificate")
    env.serial += 2
    assert env.c.frontend.running()


def test_cert_rotation_under_load(env):
    """Four certificate rotations while two clients keep working over
    https (one on a keep-alive connection, one opening a new connection
    per request): not one request fails, and the serials move on."""
    state = {"stop": False, "ok": 0, "errors": []}

    def keepalive():
        cl = rawhttp.Client(env.c.fe_https_port, ssl_context=ssl_ctx(env))
        while not state["stop"]:
            try:
                r = cl.get(cl.path("/Tables"))
                assert r.status == 200, r
                state["ok"] += 1
            except Exception as e:  # noqa: BLE001 - every failure counts
                state["errors"].append(("keep-alive", time.time(),
                                        repr(e)[:300],
                                        repr(e.__context__)[:300]))
        cl.close()

    def fresh():
        tc = https_service(env).get_table_client("tlstable")
        i = 0
        while not state["stop"]:
            try:
                cl = rawhttp.Client(env.c.fe_https_port,
                                    ssl_context=ssl_ctx(env))
                r = cl.get(cl.path("/Tables"))
                cl.close()
                assert r.status == 200, r
                tc.upsert_entity({"PartitionKey": "load", "RowKey": str(i)})
                state["ok"] += 1
            except Exception as e:  # noqa: BLE001 - every failure counts
                state["errors"].append(("new connection", time.time(),
                                        repr(e)[:300]))
            i += 1

    threads = [threading.Thread(target=keepalive),
               threading.Thread(target=fresh)]
    for t in threads:
        t.start()
    try:
        for _ in range(4):
            time.sleep(0.3)
            env.serial += 1
            cert, key = make_server_cert(env.ca, env.serial)
            write_private(env.key_path, key)
            write_private(env.cert_path, cert, 0o644)
            hup(env)
            wait_for(lambda: new_conn_serial(env) == env.serial,
                     "serial %d" % env.serial)
        time.sleep(0.3)
    finally:
        state["stop"] = True
        for t in threads:
            t.join(60)
    assert state["errors"] == [], state["errors"][:5]
    assert state["ok"] > 20, state


def test_https_only_front_end(env, tmp_path):
    """A second front end with --listen "" serves HTTPS only: its port file
    names no http port, the SDK works over https."""
    ports = str(tmp_path / "fe.ports")
    p = subprocess.Popen(
        [env.c.bins["frontend"], "--listen", "", "--https-listen",
         "127.0.0.1:0", "--tls-cert", env.cert_path, "--tls-key",
         env.key_path, "--master", env.c.master_rpc_addr, "--port-file",
         ports] + env.c.tls_args("fe-https-only", "fe"), stdout=subprocess.DEVNULL,
        stderr=open(str(tmp_path / "fe.stderr"), "wb"))
    try:
        wait_for(lambda: os.path.exists(ports), "the port file")
        with open(ports) as f:
            keys = dict(line.split("=") for line in f.read().split())
        assert set(keys) == {"https"}, keys
        from azure.data.tables import TableServiceClient
        svc = TableServiceClient.from_connection_string(
            "DefaultEndpointsProtocol=https;AccountName=%s;AccountKey=%s;"
            "TableEndpoint=https://127.0.0.1:%s/%s;"
            % (DEV_ACCOUNT, DEV_KEY, keys["https"].strip(), DEV_ACCOUNT),
            connection_verify=env.ca_path, retry_total=2)
        assert "tlstable" in [t.name for t in svc.list_tables()]
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(10) == 0


def test_stalled_handshake_bounded(env, tmp_path):
    """The hostile-client bounds hold on the HTTPS port too: with
    --header-timeout-ms 1000 and one worker, a connection that never starts
    its TLS handshake and one that stops half-way through its ClientHello
    are both closed within the bound (plus the sweep), while a normal
    client is served at once on the same worker (libmicrohttpd 0.9.75
    keeps a half-done handshake "ready": with a 0 ms timer the worker
    froze until that client left), and SIGTERM stops at once."""
    ports = str(tmp_path / "fe.ports")
    p = subprocess.Popen(
        [env.c.bins["frontend"], "--listen", "", "--https-listen",
         "127.0.0.1:0", "--tls-cert", env.cert_path, "--tls-key",
         env.key_path, "--master", env.c.master_rpc_addr, "--port-file",
         ports, "--header-timeout-ms", "1000", "--threads", "1"] +
        env.c.tls_args("fe-https-only", "fe"),
        stdout=subprocess.DEVNULL,
        stderr=open(str(tmp_path / "fe.stderr"), "wb"))
    try:
        wait_for(lambda: os.path.exists(ports), "the port file")
        with open(ports) as f:
            port = int(f.read().split("=")[1])
        silent = socket.create_connection(("127.0.0.1", port), timeout=10)
        half = socket.create_connection(("127.0.0.1", port), timeout=10)
        # A TLS record header announcing a 512-byte ClientHello, then
        # nothing more.
        half.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
        t0 = time.monotonic()
        # One worker: the stalled handshakes are on the same loop, which
        # must go on serving.
        cl = rawhttp.Client(port, ssl_context=ssl_ctx(env), timeout=5)
        assert cl.get(cl.path("/Tables")).status == 200
        cl.close()
        assert time.monotonic() - t0 < 0.9  # before the bound closed them
        for s in (silent, half):
            data = b""
            try:
                while True:  # at most a TLS alert record, then the close
                    chunk = s.recv(100)
                    if not chunk:
                        break
                    data += chunk
            except ConnectionResetError:
                pass
            s.close()
            assert data == b"" or data[:1] == b"\x15", data  # alert
            took = time.monotonic() - t0
            assert took < 4.0, took
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(10) == 0


# ------------------------------------------------------------ accounts
def acct_service(env, account, key, https=False):
    from azure.core.credentials import AzureNamedKeyCredential
    from azure.data.tables import TableServiceClient
    if https:
        return TableServiceClient(
            endpoint="https://127.0.0.1:%d/%s" % (env.c.fe_https_port,
                                                  account),
            credential=AzureNamedKeyCredential(account, key),
            connection_verify=env.ca_path, retry_total=0)
    return TableServiceClient(
        endpoint="http://127.0.0.1:%d/%s" % (env.c.fe_port, account),
        credential=AzureNamedKeyCredential(account, key), retry_total=0)


def works(svc):
    from azure.core.exceptions import ClientAuthenticationError
    try:
        list(svc.list_tables())
        return True
    except ClientAuthenticationError:
        return False


def auth_error(svc):
    from azure.core.exceptions import HttpResponseError
    with pytest.raises(HttpResponseError) as ei:
        list(svc.list_tables())
    return ei.value.status_code, ei.value.error_code


def set_accounts(env, text, mode=0o600):
    write_private(env.accounts_path, text, mode)
    hup(env)


def reloads(env):
    return fe_log(env).count("account(s) from %s in service"
                             % env.accounts_path)


def test_account_added_and_removed_on_sighup(env):
    one = acct_service(env, "acctone", KEY_A1, https=True)
    two = acct_service(env, "accttwo", KEY_B)
    assert works(one)
    assert auth_error(two) == (403, "AuthenticationFailed")
    set_accounts(env, "acctone %s\naccttwo %s\n" % (KEY_A1, KEY_B))
    wait_for(lambda: works(two), "accttwo after SIGHUP")
    two.create_table("two")
    assert works(one)
    n = reloads(env)
    set_accounts(env, "acctone %s\n" % KEY_A1)
    wait_for(lambda: reloads(env) > n, "the reload")
    assert auth_error(two) == (403, "AuthenticationFailed")
    assert works(one)
    # The development account is not in the file and stays (--dev-account).
    assert works(env.c.table_service_client())


def test_bad_accounts_file_keeps_accounts(env):
    """A malformed file (bad base64 on line 3) and a world-readable one are
    not applied on SIGHUP: the accounts in service stay, the log names the
    line or the mode, never a key."""
    one = acct_service(env, "acctone", KEY_A1)
    set_accounts(env, "# c\naccttwo %s\nacctthree not*base64\n" % KEY_B)
    wait_log(env, "%s:3: expected" % env.accounts_path)
    assert works(one)
    assert auth_error(acct_service(env, "accttwo", KEY_B))[0] == 403
    set_accounts(env, "accttwo %s\n" % KEY_B, mode=0o644)
    wait_log(env, "%s has mode 0644" % env.accounts_path)
    assert works(one)
    assert auth_error(acct_service(env, "accttwo", KEY_B))[0] == 403
    log = fe_log(env)
    assert KEY_B not in log and "not*base64" not in log
    set_accounts(env, "acctone %s\n" % KEY_A1)


def test_key_rotation_without_failed_requests(env):
    """key1 -> (key1, key2) -> key2 with SIGHUPs while a client keeps
    writing and reading: not one request fails."""
    set_accounts(env, "acctrot %s\n" % KEY_A1)
    wait_for(lambda: works(acct_service(env, "acctrot", KEY_A1)), "acctrot")
    state = {"key": KEY_A1, "stop": False, "ok": 0, "errors": []}

    def client():
        i = 0
        while not state["stop"]:
            key = state["key"]
            try:
                svc = acct_service(env, "acctrot", key, https=(i % 2 == 0))
                tc = svc.get_table_client("rot")
                tc.upsert_entity({"PartitionKey": "p", "RowKey": str(i)})
                tc.get_entity("p", str(i))
                state["ok"] += 1
            except Exception as e:  # noqa: BLE001 - every failure counts
                state["errors"].append((key == KEY_A1, repr(e)[:300]))
            i += 1

    acct_service(env, "acctrot", KEY_A1).create_table("rot")
    t = threading.Thread(target=client)
    t.start()
    try:
        time.sleep(0.5)
        n = reloads(env)
        set_accounts(env, "acctrot %s %s\n" % (KEY_A1, KEY_A2))
        wait_for(lambda: reloads(env) > n, "reload 1")
        time.sleep(0.5)
        state["key"] = KEY_A2  # clients move to the new key
        time.sleep(0.5)
        n = reloads(env)
        set_accounts(env, "acctrot %s\n" % KEY_A2)
        wait_for(lambda: reloads(env) > n, "reload 2")
        time.sleep(0.5)
    finally:
        state["stop"] = True
        t.join(60)
    assert state["errors"] == [], state["errors"][:5]
    assert state["ok"] > 10, state
    assert auth_error(acct_service(env, "acctrot", KEY_A1)) == \
        (403, "AuthenticationFailed")
    assert works(acct_service(env, "acctrot", KEY_A2))
    set_accounts(env, "acctone %s\n" % KEY_A1)


def _start_fe(env, accounts_path, tmp):
    """rt-frontend alone with @accounts_path: (exit code, stderr)."""
    argv = [env.c.bins["frontend"], "--listen", "127.0.0.1:0",
            "--master", env.c.master_rpc_addr, "--accounts", accounts_path,
            "--port-file", os.path.join(tmp, "fe.ports")
            ] + env.c.tls_args("fe-alone", "fe")
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=5)
        return r.returncode, r.stderr
    except subprocess.TimeoutExpired as e:
        return None, str(e.stderr)


def test_private_files_required_at_start(env, tmp_path):
    """An accounts file others can read, or owned by another user, and a
    TLS key others can read: the front end refuses to start (exit 2) and
    says why."""
    p = str(tmp_path / "accounts")
    write_private(p, "acctone %s\n" % KEY_A1, 0o644)
    rc, err = _start_fe(env, p, str(tmp_path))
    assert rc == 2, err
    assert "has mode 0644" in err and KEY_A1 not in err, err
    if os.geteuid() == 0:
        os.chmod(p, 0o600)
        os.chown(p, 65534, 65534)
        rc, err = _start_fe(env, p, str(tmp_path))
        assert rc == 2, err
        assert "owned by uid 65534, not by the running user" in err, err
    key = str(tmp_path / "k.pem")
    cert = str(tmp_path / "c.pem")
    c, k = make_server_cert(env.ca, 77)
    write_private(cert, c, 0o644)
    write_private(key, k, 0o640)
    r = subprocess.run([env.c.bins["frontend"], "--listen", "",
                        "--https-listen", "127.0.0.1:0", "--tls-cert", cert,
                        "--tls-key", key, "--master", env.c.master_rpc_addr]
                       + env.c.tls_args("fe-alone", "fe"),
                       capture_output=True, text=True, timeout=5)
    assert r.returncode == 2, r.stderr
    assert "group/other may access the private key" in r.stderr, r.stderr


# ------------------------------------------------------------ secrets
def test_no_secrets_in_logs(env):
    """Requests of every kind at debug level (SharedKey good and bad, SAS
    good and with a wrong sig, a reload): no account key, SharedKey
    signature or SAS signature appears in the front end's log."""
    from azure.core.credentials import AzureSasCredential
    from azure.data.tables import TableClient
    seen_auth = []

    def hook(request):
        a = request.http_request.headers.get("Authorization")
        if a:
            seen_auth.append(a.split(":", 1)[1])

    svc = https_service(env, raw_request_hook=hook)
    svc.create_table("secrets")
    tc = svc.get_table_client("secrets")
    tc.upsert_entity({"PartitionKey": "p", "RowKey": "r"})
    works(acct_service(env, "acctone", KEY_B))  # wrong key: 403
    sas = rawhttp.table_sas("secrets", sp="r")
    sig = urllib.parse.parse_qs(sas)["sig"][0]
    cl = rawhttp.Client(env.c.fe_port)
    r = cl.get(cl.path("/secrets()?" + sas), auth="none")
    assert r.status == 200, r
    bad = sas.replace(urllib.parse.quote(sig, safe=""), "AAAA" + "B" * 40)
    r = cl.get(cl.path("/secrets()?" + bad), auth="none")
    assert r.status == 403, r
    stc = TableClient(endpoint=env.c.table_endpoint, table_name="secrets",
                      credential=AzureSasCredential(sas), retry_total=0)
    list(stc.list_entities())
    set_accounts(env, "acctone %s %s\n" % (KEY_A1, KEY_A2))
    wait_log(env, "account(s) from")
    assert seen_auth
    log = fe_log(env)
    for secret in [DEV_KEY, KEY_A1, KEY_A2, KEY_B, sig,
                   urllib.parse.quote(sig, safe="")] + seen_auth:
        assert secret not in log, "secret in the front end's log"
    assert re.search(r"sig=[^*&\s\"']", log, re.I) is None  # none unblanked
    set_accounts(env, "acctone %s\n" % KEY_A1)
