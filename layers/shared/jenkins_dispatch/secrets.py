"""Secrets Manager access through Powertools Parameters, cached between invocations of a warm Lambda."""

from __future__ import annotations

from .errors import ConfigError

SECRET_MAX_AGE_SECONDS = 300

NEEDS_BOTO3 = "reading secrets from Secrets Manager needs boto3, which is not installed: pip install 'jenkins-dispatch[aws]'"


def fetch_secret_string(arn: str, *, force: bool = False) -> str:
    """The SecretString of ``arn``, cached for SECRET_MAX_AGE_SECONDS unless ``force``."""
    # Imported here: boto3 is the "aws" extra (the Lambda runtime has it), and plain variables never need it.
    try:
        from aws_lambda_powertools.utilities import parameters
    except ImportError as exc:
        if exc.name and exc.name.split(".")[0] in ("boto3", "botocore"):
            raise ConfigError(NEEDS_BOTO3) from None
        raise

    value = parameters.get_secret(arn, max_age=SECRET_MAX_AGE_SECONDS, force_fetch=force)
    if isinstance(value, bytes):
        value = value.decode("utf-8")
    return value
