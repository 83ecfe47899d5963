"""Everything that knows Jenkins: ``client.py`` (the only code that speaks HTTP to Jenkins) and
``answers.py`` (pure: what each answer means, job paths, parameter values; see docs/jenkins.md).

Must not import: the database (``store/``, the driver), nor ``dispatching/``, ``callbacks/``,
``operating/``, ``runtime`` or the entry points. It tells what Jenkins said; what happens to a row is
decided elsewhere. From the rest of the package it uses only ``errors``, ``config`` and ``observability``.
"""
