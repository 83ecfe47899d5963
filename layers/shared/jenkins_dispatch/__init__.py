"""jenkins-dispatch: every Jenkins job queued in a database table triggered exactly once, and seen to finish.

The folders hold the behaviour: ``store/`` (the database), ``jenkins/`` (Jenkins), ``dispatching/`` (getting jobs
into Jenkins), ``callbacks/`` (Jenkins's notifications), ``operating/`` (what operators ask), ``ui/`` (the web page)
and ``config/`` (the settings, read once). Beside them:
- entry points, which nothing imports: ``cli/`` (the command line, a module per command group), ``serve.py``
  (everything in one process outside AWS), ``lambda_entry.py`` (the dispatcher function on Lambda),
  ``custom_resource.py`` (the schema on every stack update);
- what every folder may use: ``errors.py`` (the errors raised on purpose), ``observability.py`` (logs, metrics,
  traces), ``secrets.py`` (Secrets Manager), ``runtime.py`` (what a warm process keeps), ``http_service.py`` (the
  HTTP server and stop signals of ``serve`` and ``ui``);
- pure: ``moments.py`` (times as operators type them), ``inputs.py`` (what an operator may give).
docs/architecture.md draws the whole house.
"""

__version__ = "0.1.0"
