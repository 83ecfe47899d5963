"""`jenkins-dispatch ui`: the operator's web page, server-rendered (Jinja2, autoescaped), no build step, no CDN.

``server`` listens and answers (sessions, login, CSRF, security headers), ``pages`` builds each page from the
same operator functions the command line calls (``operating/``, ``store.levers``), ``forms`` reads and checks
what a request asks for (pure), ``security`` decides who may do what (pure). Templates and the small CSS and
script live beside the code and are served by the page itself.

Uses everything below the entry points (``operating``, ``store``, ``config``); only ``cli`` (and ``serve``)
start it.
"""
