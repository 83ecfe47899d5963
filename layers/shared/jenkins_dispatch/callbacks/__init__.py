"""Jenkins's Notification-plugin callbacks: ``webhook.py`` (one HTTP request in, one fenced statement out)
and ``notifications.py`` (pure: the token, the body, the parsed notification and its transition); on Lambda,
``http_api.py`` turns API Gateway's events into the same call.

Uses ``store/``, the pure ``jenkins.answers`` and ``dispatching.decisions`` (a build result's final status,
the same rule the reconciler applies). Must not call Jenkins (``jenkins.client``), nor import the rest of
``dispatching/``, ``operating/`` or the entry points.
"""
