"""Secrets by ARN (moto Secrets Manager), cached across invocations; IAM auth; TLS that verifies."""

from __future__ import annotations

import datetime as dt
import json
import ssl
from pathlib import Path

import pytest

pytest.importorskip("moto")
botocore = pytest.importorskip("botocore")

import boto3  # noqa: E402
from botocore.client import BaseClient  # noqa: E402
from moto import mock_aws  # noqa: E402

from jenkins_dispatch import runtime  # noqa: E402
from jenkins_dispatch.config import DatabaseSettings, load_settings  # noqa: E402
from jenkins_dispatch.db import Database, tls_context  # noqa: E402
from jenkins_dispatch.errors import ConfigError, DatabaseUnavailable  # noqa: E402

DB_SECRET = {
    "engine": "postgres",
    "host": "mydb.cluster-abc.us-east-1.rds.amazonaws.com",
    "port": 5432,
    "username": "dispatch",
    "password": "db-Pa55word!",
    "dbname": "jobs",
}
JENKINS_SECRET = {"url": "https://ci.example.com/jenkins", "user": "dispatcher", "api_token": "jenkins-T0ken"}
WEBHOOK_TOKEN = "hook-S3cret"


@pytest.fixture
def aws(monkeypatch):
    from aws_lambda_powertools.utilities import parameters

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    parameters.clear_caches()
    # Powertools keeps one provider (with one boto3 client) per process: start from a clean slate so
    # it builds its client inside moto's mock.
    monkeypatch.setattr(parameters.secrets, "DEFAULT_PROVIDERS", {}, raising=False)
    with mock_aws():
        yield boto3.client("secretsmanager", region_name="us-east-1")
    parameters.clear_caches()
    runtime.reset()


@pytest.fixture
def secret_calls(monkeypatch):
    """Counts GetSecretValue calls that reach (moto's) Secrets Manager, per SecretId."""
    calls: list[str] = []
    original = BaseClient._make_api_call

    def counting(self, operation_name, api_params):
        if operation_name == "GetSecretValue":
            calls.append(api_params["SecretId"])
        return original(self, operation_name, api_params)

    monkeypatch.setattr(BaseClient, "_make_api_call", counting)
    return calls


def _secrets(client) -> dict[str, str]:
    return {
        "DB_SECRET_ARN": client.create_secret(Name="jd/db", SecretString=json.dumps(DB_SECRET))["ARN"],
        "JENKINS_SECRET_ARN": client.create_secret(Name="jd/jenkins", SecretString=json.dumps(JENKINS_SECRET))[
            "ARN"
        ],
        "WEBHOOK_SECRET_ARN": client.create_secret(Name="jd/webhook", SecretString=WEBHOOK_TOKEN)["ARN"],
    }


def test_settings_read_by_arn_and_cached(aws, secret_calls):
    arns = _secrets(aws)
    env = {**arns, "LEASE_SECONDS": "120"}
    settings = load_settings(env)
    db = settings.database
    assert (db.host, db.port, db.user, db.password, db.dbname) == (
        DB_SECRET["host"], 5432, "dispatch", DB_SECRET["password"], "jobs"
    )
    assert db.tls == "verify" and db.secret_arn == arns["DB_SECRET_ARN"] and not db.iam_auth
    jenkins = settings.require_jenkins()
    assert (jenkins.url, jenkins.user, jenkins.api_token) == (
        "https://ci.example.com/jenkins/", "dispatcher", "jenkins-T0ken"
    )
    assert settings.require_webhook_secret() == WEBHOOK_TOKEN
    assert sorted(secret_calls) == sorted(arns.values())

    # A warm Lambda's later invocations (settings read again) are served from the cache.
    for _ in range(3):
        load_settings(env)
    assert len(secret_calls) == 3

    # No secret value leaks through repr (logs print settings objects).
    text = repr(settings)
    for value in (DB_SECRET["password"], JENKINS_SECRET["api_token"], WEBHOOK_TOKEN):
        assert value not in text


def test_runtime_settings_read_secrets_once(aws, secret_calls, monkeypatch):
    arns = _secrets(aws)
    for name, arn in arns.items():
        monkeypatch.setenv(name, arn)
    for name in ("DATABASE_URL", "JENKINS_URL", "JENKINS_USER", "JENKINS_API_TOKEN", "WEBHOOK_SECRET"):
        monkeypatch.delenv(name, raising=False)
    runtime.reset()
    first = runtime.settings()
    assert runtime.settings() is first
    assert len(secret_calls) == 3


def test_forced_refresh_rereads_a_rotated_secret(aws, secret_calls):
    from jenkins_dispatch.secrets import fetch_secret_string

    arn = _secrets(aws)["DB_SECRET_ARN"]
    assert json.loads(fetch_secret_string(arn))["password"] == DB_SECRET["password"]
    aws.put_secret_value(SecretId=arn, SecretString=json.dumps({**DB_SECRET, "password": "rotated"}))
    assert json.loads(fetch_secret_string(arn))["password"] == DB_SECRET["password"]  # cached
    assert json.loads(fetch_secret_string(arn, force=True))["password"] == "rotated"
    assert len(secret_calls) == 2


def test_json_webhook_secret_with_token_field(aws):
    arn = aws.create_secret(Name="jd/hook-json", SecretString=json.dumps({"token": "from-json"}))["ARN"]
    settings = load_settings({"DATABASE_URL": "postgresql://u@127.0.0.1/db", "WEBHOOK_SECRET_ARN": arn})
    assert settings.webhook_secret == "from-json"


@pytest.mark.parametrize("name", ["DB_SECRET_ARN", "JENKINS_SECRET_ARN", "WEBHOOK_SECRET_ARN"])
def test_missing_secret_error_names_the_variable(aws, name):
    arns = _secrets(aws)
    arns[name] = "arn:aws:secretsmanager:us-east-1:123456789012:secret:jd/absent-AbCdEf"
    with pytest.raises(ConfigError) as info:
        load_settings(arns)
    message = str(info.value)
    assert name in message and "jd/absent" in message
    assert "\n" not in message


def test_malformed_db_secret_error_names_the_variable_not_the_value(aws):
    arn = aws.create_secret(Name="jd/bad", SecretString="password=hunter2")["ARN"]
    with pytest.raises(ConfigError) as info:
        load_settings({"DB_SECRET_ARN": arn})
    assert "DB_SECRET_ARN" in str(info.value)
    assert "hunter2" not in str(info.value)


def test_db_secret_without_password_is_refused(aws):
    arn = aws.create_secret(Name="jd/nopw", SecretString=json.dumps({"host": "h", "username": "u"}))["ARN"]
    with pytest.raises(ConfigError, match="DB_SECRET_ARN"):
        load_settings({"DB_SECRET_ARN": arn})


def test_template_style_overrides_win_over_the_secret(aws):
    """The template sets DB_HOST (e.g. an RDS Proxy endpoint) next to DB_SECRET_ARN."""
    arn = _secrets(aws)["DB_SECRET_ARN"]
    settings = load_settings(
        {"DB_SECRET_ARN": arn, "DB_HOST": "proxy.proxy-abc.us-east-1.rds.amazonaws.com", "DB_PORT": "5432",
         "DB_NAME": "", "DB_USER": "", "DB_IAM_AUTH": "false"}
    )
    assert settings.database.host == "proxy.proxy-abc.us-east-1.rds.amazonaws.com"
    assert settings.database.dbname == "jobs" and settings.database.user == "dispatch"


def test_iam_auth_uses_a_generated_token_not_a_secret(aws, monkeypatch):
    from jenkins_dispatch import db as db_module

    settings = load_settings(
        {"DB_IAM_AUTH": "true", "DB_HOST": "proxy.example.internal", "DB_USER": "dispatch", "DB_NAME": "jobs",
         "AWS_REGION": "us-east-1"}
    ).database
    assert settings.iam_auth and settings.password is None and settings.tls == "verify"
    token = db_module._iam_token(settings)
    assert token.startswith("proxy.example.internal:5432/?Action=connect") and "DBUser=dispatch" in token
    with pytest.raises(ConfigError, match="DB_USER"):
        load_settings({"DB_IAM_AUTH": "true", "DB_HOST": "h"})


# --------------------------------------------------------------------------- TLS


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


def test_ca_bundle_from_the_environment(tmp_path):
    ca_file, _, _ = _certificates(tmp_path)
    settings = load_settings({"DATABASE_URL": "postgresql://u:p@db.test.internal/x", "DB_CA_BUNDLE": str(ca_file)})
    assert settings.database.tls == "verify" and settings.database.ca_bundle == str(ca_file)
    with pytest.raises(ConfigError, match="DB_CA_BUNDLE"):
        tls_context(DatabaseSettings(tls="verify", ca_bundle=str(tmp_path / "missing.pem")))


def test_verified_tls_never_falls_back_to_plaintext(database_url, tmp_path):
    """The test server offers no certificate we trust (or no TLS at all): the connection must fail."""
    from jenkins_dispatch.config import parse_database_url

    ca_file, _, _ = _certificates(tmp_path)
    plain = parse_database_url(database_url)
    if plain.unix_socket:
        pytest.skip("the test database is reached over a Unix socket")
    settings = DatabaseSettings(
        host=plain.host, port=plain.port, user=plain.user, password=plain.password, dbname=plain.dbname,
        tls="verify", ca_bundle=str(ca_file), connect_timeout_seconds=3,
    )
    with pytest.raises(DatabaseUnavailable) as info, Database(settings) as db:
        db.run("SELECT 1")
    assert f"{plain.host}:{plain.port}" in str(info.value)
