"""The per-job label of `serve`'s histograms is bounded (queue wait and build duration: tests/integration/
test_settle_timings.py, tests/system/test_serve_histograms.py)."""

from __future__ import annotations

from jenkins_dispatch.observability import JOB_LABEL_LIMIT, OTHER_JOBS, PrometheusSink


def test_the_job_label_is_bounded_and_stable():
    sink = PrometheusSink()
    names = [f"team/job-{n}" for n in range(JOB_LABEL_LIMIT + 20)]
    labels = [sink.job_label(name) for name in names]
    assert labels[:JOB_LABEL_LIMIT] == names[:JOB_LABEL_LIMIT]
    assert set(labels[JOB_LABEL_LIMIT:]) == {OTHER_JOBS}
    assert sink.job_label(names[3]) == names[3]  # a name that has a label keeps it
    assert sink.job_label(OTHER_JOBS) == OTHER_JOBS
    for name in names:
        sink.observe_job("QueueWait", name, 1.5)
    from prometheus_client.exposition import generate_latest

    text = generate_latest(sink.registry).decode()
    counts = [line for line in text.splitlines() if line.startswith("jenkins_dispatch_queue_wait_seconds_count")]
    assert len(counts) == JOB_LABEL_LIMIT + 1
    assert 'jenkins_dispatch_queue_wait_seconds_count{job="other"} 20.0' in counts
