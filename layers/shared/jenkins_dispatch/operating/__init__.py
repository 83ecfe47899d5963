"""What operators ask for beyond the queue's own statements: one job's details and its cancel
(``operator.py``), what a retry or cancel of one job comes to (``transitions.py``, pure), retry and cancel by
filters (``bulk.py``), why a job is still waiting (``waiting.py``,
pure) and every health check (``doctor.py``); schedules as operators change them (``scheduling.py``), the page's
overview (``overview.py``) and picture of time (``timeline.py``), a job's story in one sentence (``story.py``,
pure), and values as people read them (``display.py``).

Uses ``store/`` (the levers, the reports, and doctor's introspection), ``jenkins/`` and ``dispatching/`` (cancelling in
Jenkins, the client a pass would use).
Must not import ``callbacks/`` or the entry points: the CLI calls into here, never the reverse.
"""
