"""Where and how to reach the database server, whichever the engine: the connect arguments every driver needs
(built once, from ``DatabaseSettings``), TLS that always verifies, and RDS IAM tokens used as passwords.

Each engine's session (``dialects/<engine>/session.py``) hands an ``Endpoint`` to its driver under the names
that driver uses.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ..config import DatabaseSettings
from ..errors import ConfigError

# The layer build drops AWS's RDS CA bundle here (see layers/shared/Makefile).
BUNDLED_RDS_CA = Path(__file__).with_name("rds-ca-bundle.pem")


@dataclass(frozen=True)
class Endpoint:
    """What any driver needs to open a session: who, where (a TCP address or a Unix socket) and which TLS."""

    user: str
    password: str | None
    database: str
    connect_timeout: float
    host: str | None  # None: over ``unix_socket``
    port: int | None
    unix_socket: str | None
    tls: ssl.SSLContext | None  # None: plain TCP (local servers, Unix sockets)


def endpoint(settings: DatabaseSettings) -> Endpoint:
    """The connect arguments of ``settings``: an IAM token as the password when asked, a verifying TLS context
    for TCP when asked. Makes a new token each time (they live 15 minutes): call it per connection."""
    password = iam_token(settings) if settings.iam_auth else settings.password
    if settings.unix_socket:
        return Endpoint(settings.user, password, settings.dbname, settings.connect_timeout_seconds,
                        None, None, settings.unix_socket, None)
    tls = tls_context(settings) if settings.tls == "verify" else None
    return Endpoint(settings.user, password, settings.dbname, settings.connect_timeout_seconds,
                    settings.host, settings.port, None, tls)


def tls_context(settings: DatabaseSettings) -> ssl.SSLContext:
    """System roots (RDS Proxy uses ACM certificates) plus the RDS CA bundle (instance endpoints). Built once per
    bundle in a process: loading the system's roots costs ~20 ms of CPU, at every connect when rebuilt, and one
    context serves any number of connections (a bundle changed on disk is read by the next process)."""
    return _verifying_context(settings.ca_bundle or (str(BUNDLED_RDS_CA) if BUNDLED_RDS_CA.exists() else None))


@cache
def _verifying_context(bundle: str | None) -> ssl.SSLContext:
    context = ssl.create_default_context()
    if bundle:
        try:
            context.load_verify_locations(cafile=bundle)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"DB_CA_BUNDLE: cannot load CA bundle {bundle}: {exc}") from None
    context.check_hostname = True
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def iam_token(settings: DatabaseSettings) -> str:
    """An RDS IAM authentication token, used as the password (the same for every engine)."""
    try:
        import boto3  # only with IAM auth: the "aws" extra, which the Lambda runtime has
    except ImportError:
        raise ConfigError("DB_IAM_AUTH=true needs boto3 to make a token, which is not installed: "
                          "pip install 'jenkins-dispatch[aws]'") from None

    client = boto3.client("rds", region_name=settings.region)
    return client.generate_db_auth_token(settings.host, settings.port, settings.user)
