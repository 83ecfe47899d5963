"""Everything that knows Jenkins: ``client.py`` (the only code that speaks HTTP to Jenkins), ``answers.py``
(pure: what each answer means; see docs/jenkins.md) and ``jobs.py`` (pure: a job's URL path from its name,
the form values of its parameters); ``controllers.py`` resolves a row's own controller (its settings, a client,
its links).

Must not import: the database (``store/``, the driver), nor ``dispatching/``, ``callbacks/``,
``operating/``, ``runtime`` or the entry points. It tells what Jenkins said; what happens to a row is
decided elsewhere. From the rest of the package it uses only ``errors``, ``config`` and ``observability``.
"""
