"""CloudFormation custom resource (Custom::Migrations): applies the queue schema on stack create/update."""

from jenkins_dispatch.custom_resource import handle
from jenkins_dispatch.observability import logger


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event, context):
    return handle(event, context)
