"""Secrets Manager access through Powertools Parameters, cached between invocations of a warm Lambda."""

from __future__ import annotations

SECRET_MAX_AGE_SECONDS = 300


def fetch_secret_string(arn: str, *, force: bool = False) -> str:
    # Imported here so local runs that use plain variables never import boto3.
    from aws_lambda_powertools.utilities import parameters

    value = parameters.get_secret(arn, max_age=SECRET_MAX_AGE_SECONDS, force_fetch=force)
    if isinstance(value, bytes):
        value = value.decode("utf-8")
    return value
