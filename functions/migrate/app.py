"""Lambda handler: the CloudFormation custom resource (Custom::Migrations) that applies the queue schema on
stack create and update.

The package (``jenkins_dispatch.custom_resource``) applies the migrations and answers CloudFormation's
pre-signed URL exactly once; the decorator gives every log line the invocation's context and the
CloudFormation request id.
"""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from jenkins_dispatch.custom_resource import handle
from jenkins_dispatch.observability import logger

CORRELATION_ID_PATH = "RequestId"  # CloudFormation's id of this create / update / delete request


# Tracing is lazy, for the cold start: the X-Ray SDK costs ~0.3 s to import, so the package makes its Tracer on
# first use (observability.tracer()) instead of decorating the handler with one. No metrics decorator: this
# function runs once per deploy, always from a cold start, and emits no metric.
@logger.inject_lambda_context(correlation_id_path=CORRELATION_ID_PATH, clear_state=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Apply the schema (Create, Update) or do nothing (Delete), and tell CloudFormation which."""
    return handle(event, context)
