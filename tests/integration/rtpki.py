"""Test credentials for mutual TLS (common/rt_tls.h): a CA and node
certificates whose CN is "ROLE:NAME", written as a node directory
DIR/{ca.crt,node.crt,node.key} (key 0600, directory 0700), made with
python3-cryptography (a dependency of python3-azure). For tests and
benchmarks only: operators use `rtctl cluster init`.

    ca = make_ca("test CA")
    issue(ca, "master:m1", "/tmp/x/m1")   # -> "/tmp/x/m1"
    masters_over_tls(cluster, "/tmp/x")   # --cluster-tls for each master
                                          # (unless rtcluster does it)
"""

import datetime
import os

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _name(cn):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_ca(cn):
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    crt = (x509.CertificateBuilder().subject_name(_name(cn))
           .issuer_name(_name(cn)).public_key(key.public_key())
           .serial_number(x509.random_serial_number())
           .not_valid_before(now - datetime.timedelta(minutes=5))
           .not_valid_after(now + datetime.timedelta(days=2))
           .add_extension(x509.BasicConstraints(ca=True, path_length=0),
                          critical=True)
           .add_extension(x509.KeyUsage(False, False, False, False, False,
                                        True, True, False, False),
                          critical=True)
           .sign(key, hashes.SHA256()))
    return key, crt


def issue(ca, cn, d):
    """Writes @d/{ca.crt,node.crt,node.key} for @cn issued by @ca."""
    ca_key, ca_crt = ca
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    crt = (x509.CertificateBuilder().subject_name(_name(cn))
           .issuer_name(ca_crt.subject).public_key(key.public_key())
           .serial_number(x509.random_serial_number())
           .not_valid_before(now - datetime.timedelta(minutes=5))
           .not_valid_after(now + datetime.timedelta(days=2))
           .add_extension(x509.BasicConstraints(ca=False, path_length=None),
                          critical=True)
           .add_extension(x509.ExtendedKeyUsage(
               [ExtendedKeyUsageOID.SERVER_AUTH,
                ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
           .sign(ca_key, hashes.SHA256()))
    os.makedirs(d, mode=0o700)
    with open(os.path.join(d, "ca.crt"), "wb") as f:
        f.write(ca_crt.public_bytes(serialization.Encoding.PEM))
    with open(os.path.join(d, "node.crt"), "wb") as f:
        f.write(crt.public_bytes(serialization.Encoding.PEM))
    fd = os.open(os.path.join(d, "node.key"),
                 os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM,
                                  serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    return d


def masters_over_tls(cluster, pki):
    """Before @cluster starts: a CA, and for each of its masters a
    `master:mN` node directory under @pki passed as --cluster-tls (their
    Raft traffic is then mutual TLS). Returns the CA (to issue more), or
    None when rtcluster already gives every process credentials of its
    own cluster CA (then issue more with cluster.tls_node)."""
    if getattr(cluster, "cluster_tls", False) and \
            hasattr(cluster, "tls_node"):
        return None
    ca = make_ca("rangetable test CA")
    for i, m in enumerate(cluster.masters, 1):
        d = issue(ca, "master:m%d" % i, os.path.join(pki, "m%d" % i))
        cluster.master_args.setdefault(m.name, [])
        cluster.master_args[m.name] += ["--cluster-tls", d]
    return ca
