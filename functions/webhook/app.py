"""Lambda handler: Jenkins Notification-plugin callbacks (HTTP API / Function URL, payload 2.0).

Powertools' resolver (``jenkins_dispatch.callbacks.http_api``) routes the event and shapes the JSON answer around
the webhook's transport-free core, the same one `serve` calls. The decorators give every log line the
invocation's context and the API request id, and flush the metrics once the invocation ends, whatever happened.
"""

from typing import Any

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from jenkins_dispatch.callbacks.http_api import handle_http_event
from jenkins_dispatch.observability import logger, metrics


# Tracing and metrics are lazy, for the cold start: the X-Ray SDK costs ~0.3 s to import, so the package makes
# its Tracer on first use (observability.tracer()) instead of decorating the handler with one, and metrics are
# buffered and printed as EMF at the end (Prometheus is never imported here). The first invocation of a
# container also counts one ColdStart, to watch what that saves.
@metrics.log_metrics(capture_cold_start_metric=True)
@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP, clear_state=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Answer one Jenkins notification (or a request to any other path, with the route to use)."""
    return handle_http_event(event, context)
