"""db.tls_context: verified TLS trusts the CA bundle and the system roots, refuses anything else."""

from __future__ import annotations

import datetime as dt
import ssl
from pathlib import Path

import pytest

from jenkins_dispatch.config import DatabaseSettings, load_settings
from jenkins_dispatch.errors import ConfigError
from jenkins_dispatch.store.db import tls_context


def test_ca_bundle_from_the_environment(tmp_path):
    ca_file, _, _ = _certificates(tmp_path)
    settings = load_settings({"DATABASE_URL": "postgresql://u:p@db.test.internal/x", "DB_CA_BUNDLE": str(ca_file)})
    assert settings.database.tls == "verify" and settings.database.ca_bundle == str(ca_file)
    with pytest.raises(ConfigError, match="DB_CA_BUNDLE"):
        tls_context(DatabaseSettings(tls="verify", ca_bundle=str(tmp_path / "missing.pem")))


def _certificates(tmp_path: Path, hostname: str = "db.test.internal"):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "jenkins-dispatch test RDS CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                key_encipherment=False, data_encipherment=False, key_agreement=False, encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hostname)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(hostname)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    ca_file = tmp_path / "rds-ca-bundle.pem"
    ca_file.write_bytes(ca.public_bytes(pem))
    cert_file = tmp_path / "server.pem"
    cert_file.write_bytes(cert.public_bytes(pem))
    key_file = tmp_path / "server.key"
    key_file.write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return ca_file, cert_file, key_file


def _handshake(client: ssl.SSLContext, cert_file: Path, key_file: Path, hostname: str) -> None:
    """A full TLS handshake in memory: raises ssl.SSLCertVerificationError when the client refuses."""
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert_file, key_file)
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    client_side = client.wrap_bio(c_in, c_out, server_hostname=hostname)
    server_side = server.wrap_bio(s_in, s_out, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(20):
        for name, side in (("client", client_side), ("server", server_side)):
            if not done[name]:
                try:
                    side.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
        if c_out.pending:
            s_in.write(c_out.read())
        if s_out.pending:
            c_in.write(s_out.read())
        if all(done.values()):
            return
    raise AssertionError("handshake did not complete")


def test_tls_context_trusts_the_ca_bundle_and_system_roots(tmp_path):
    ca_file, cert_file, key_file = _certificates(tmp_path)
    context = tls_context(DatabaseSettings(host="db.test.internal", tls="verify", ca_bundle=str(ca_file)))
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    subjects = [dict(x[0] for x in c["subject"]).get("commonName") for c in context.get_ca_certs()]
    assert "jenkins-dispatch test RDS CA" in subjects
    # System roots stay (RDS Proxy endpoints present ACM certificates).
    plain = ssl.create_default_context()
    assert len(context.get_ca_certs()) >= len(plain.get_ca_certs())
    _handshake(context, cert_file, key_file, "db.test.internal")


def test_tls_context_refuses_an_unknown_ca_and_a_wrong_name(tmp_path):
    ca_file, cert_file, key_file = _certificates(tmp_path)
    without_bundle = tls_context(DatabaseSettings(host="db.test.internal", tls="verify"))
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(without_bundle, cert_file, key_file, "db.test.internal")
    with_bundle = tls_context(DatabaseSettings(host="x", tls="verify", ca_bundle=str(ca_file)))
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(with_bundle, cert_file, key_file, "other.test.internal")
