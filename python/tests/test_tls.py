"""TLS: a stratad with --tls-cert/--tls-key and client verification
(--tls-client-auth) serves a Python client given the CA and a client
certificate, on gRPC and on the raw plane, and refuses a plaintext client
and one whose certificate another CA signed. The CA and certificates are
made when the test runs (the cryptography package)."""

import datetime
import ipaddress
import os
import tempfile
import unittest

from _support import Node, small_descriptor
from strata_client import Client

try:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
except ImportError:  # pragma: no cover
    x509 = None


def _write(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return path


class _CA:
    """A CA made now; issue() writes a certificate for 127.0.0.1."""

    def __init__(self, d, name):
        self.dir, self.name = d, name
        self.key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.timezone.utc)
        self.cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
                     .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                     .sign(self.key, hashes.SHA256()))
        self.ca_file = _write(os.path.join(d, name + "-ca.pem"), self.cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, who):
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, who)]))
                .issuer_name(self.cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
                .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                                            x509.DNSName("localhost")]), critical=False)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                               critical=False)
                .sign(self.key, hashes.SHA256()))
        base = os.path.join(self.dir, f"{self.name}-{who}")
        return (_write(base + ".pem", cert.public_bytes(serialization.Encoding.PEM)),
                _write(base + "-key.pem", key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                            serialization.NoEncryption())))


@unittest.skipIf(x509 is None, "the cryptography package is not installed: cannot make test certificates")
class TLSNodeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="strata-tls-")
        cls.ca = _CA(cls.tmp.name, "strata")
        cert, key = cls.ca.issue("node")
        cls.client_cert = cls.ca.issue("client")
        cls.node = Node(extra_args=["--tls-cert", cert, "--tls-key", key, "--tls-ca", cls.ca.ca_file,
                                    "--tls-client-auth", "--shm-socket", "off"])

    @classmethod
    def tearDownClass(cls):
        cls.node.stop()
        cls.tmp.cleanup()

    def test_served_with_ca_and_client_cert(self):
        cert, key = self.client_cert
        # The Python planes (raw tcp with TLS, gRPC) and the native plane
        # (the Go client's TLS, raw tcp).
        for raw, native in ((True, False), (False, False), (True, True)):
            with Client(self.node.addr, ca=self.ca.ca_file, cert=cert, key=key, raw=raw, refresh_interval=0,
                        native=native) as c:
                self.assertEqual(c.native_active, native)
                ns = c.open(small_descriptor())
                keys = ns.page_keys(list(range(7 + raw + 2 * native, 7 + raw + 2 * native + 32)))
                data = [os.urandom(ns.page_bytes) for _ in keys]
                self.assertEqual([r.status for r in ns.put_chain(keys, data)], ["COMMITTED"] * 2)
                bufs = [bytearray(ns.page_bytes) for _ in keys]
                ns.get(keys, bufs)
                self.assertEqual([bytes(b) for b in bufs], data)
                if native:
                    self.assertEqual((c.stats["native_puts"], c.stats["native_gets"]), (1, 1))
                    self.assertTrue(c.native_stats()["raw_active"], c.native_stats())
                    continue
                self.assertEqual(c.raw_active, raw)
                if raw:
                    self.assertGreater(c.stats["raw_reads"], 0)

    def test_refused(self):
        other = _CA(self.tmp.name, "other").issue("client")
        cases = {"plaintext": {}, "no client cert": {"ca": self.ca.ca_file},
                 "cert of another CA": {"ca": self.ca.ca_file, "cert": other[0], "key": other[1]}}
        for name, kw in cases.items():
            with self.subTest(name):
                with self.assertRaises(Exception):
                    with Client(self.node.addr, refresh_interval=0, node_timeout=2.0, **kw) as c:
                        c.open(small_descriptor())


if __name__ == "__main__":
    unittest.main()
