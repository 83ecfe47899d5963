"""Lambda handler: Jenkins Notification-plugin callbacks (HTTP API / Function URL, payload 2.0)."""

from jenkins_dispatch.webhook import handle


def lambda_handler(event, context):
    return handle(event, context)
