"""Logger, metrics and tracer shared by every part of the package (Powertools).

Logs are JSON, one line per event, with job id and dispatch id as keys. Metrics are EMF lines that
CloudWatch turns into metrics; outside Lambda they are printed like any log line. Tracing is a no-op
unless POWERTOOLS_TRACE_DISABLED is false and X-Ray is reachable.
"""

from __future__ import annotations

import os

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit

SERVICE = "jenkins-dispatch"
NAMESPACE = "JenkinsDispatch"

# Powertools reads these at construction; give local runs sane values without touching Lambda's.
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", SERVICE)
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", NAMESPACE)
if "AWS_LAMBDA_FUNCTION_NAME" not in os.environ:
    os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")

logger = Logger(service=SERVICE)
metrics = Metrics(namespace=NAMESPACE, service=SERVICE)
tracer = Tracer(service=SERVICE)

__all__ = ["logger", "metrics", "tracer", "MetricUnit", "SERVICE", "NAMESPACE"]
