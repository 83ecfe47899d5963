"""Lambda handler: the scheduled dispatcher (EventBridge rule, EventBridge Scheduler, or a manual invoke).

The handler reads the event, the package does the work (``jenkins_dispatch.lambda_entry.run_invocation``), and
the answer is the last pass's summary. The decorators give every log line the invocation's context and the
event's id, and flush the metrics once the invocation ends, whatever happened.
"""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from jenkins_dispatch.errors import InvalidInput
from jenkins_dispatch.lambda_entry import run_invocation
from jenkins_dispatch.observability import logger, metrics

# The id of the event that woke the function: an EventBridge rule's event id, or EventBridge Scheduler's
# execution id (a manual invoke has neither).
CORRELATION_ID_PATH = "id || execution_id"


def max_jobs_from_event(event: Any) -> int | None:
    """EventBridge rule and Scheduler envelopes carry no budget; a manual invoke may say {"max_jobs": N}."""
    if not isinstance(event, dict) or event.get("max_jobs") is None:
        return None
    value = event["max_jobs"]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInput(f"max_jobs must be a whole number of at least 1, got {value!r}")
    return value


# Tracing and metrics are lazy, for the cold start: the X-Ray SDK costs ~0.3 s to import, so the package makes
# its Tracer on first use (observability.tracer()) instead of decorating the handler with one, and metrics are
# buffered and printed as EMF at the end (Prometheus is never imported here). The first invocation of a
# container also counts one ColdStart, to watch what that saves.
@metrics.log_metrics(capture_cold_start_metric=True)
@logger.inject_lambda_context(correlation_id_path=CORRELATION_ID_PATH, clear_state=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Dispatch until the invocation's time is nearly up (or one pass of at most ``max_jobs``)."""
    return run_invocation(context, max_jobs=max_jobs_from_event(event))
