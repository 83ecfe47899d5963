"""Lambda handler: the scheduled dispatcher (EventBridge rule, EventBridge Scheduler, or a manual invoke)."""

from jenkins_dispatch.dispatcher import handle_event
from jenkins_dispatch.observability import logger, metrics


@metrics.log_metrics
@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event, context):
    return handle_event(event, context)
