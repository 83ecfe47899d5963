"""The three secrets the settings and secrets tests store in moto's Secrets Manager (fixture `aws`)."""

from __future__ import annotations

import json

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


def create_secrets(client) -> dict[str, str]:
    """Store the three secrets; answers the environment that names them by ARN."""
    return {
        "DB_SECRET_ARN": client.create_secret(Name="jd/db", SecretString=json.dumps(DB_SECRET))["ARN"],
        "JENKINS_SECRET_ARN": client.create_secret(Name="jd/jenkins", SecretString=json.dumps(JENKINS_SECRET))[
            "ARN"
        ],
        "WEBHOOK_SECRET_ARN": client.create_secret(Name="jd/webhook", SecretString=WEBHOOK_TOKEN)["ARN"],
    }
