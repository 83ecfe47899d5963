"""The database: sessions (``db.py``), every transition of a job row (``queue.py``), the SQL files read by
name (``statements.py``, ``dialects/<engine>/``) and the schema (``migrations.py``).

Must not speak HTTP (no ``requests``, no ``jenkins.client``) nor import ``dispatching/``, ``callbacks/``,
``operating/``, ``runtime`` or the entry points. The only Jenkins knowledge it uses is ``jenkins.jobs`` (pure: to
refuse a job name Jenkins could never run, and to read parameters with their numbers kept as text). The database driver is
imported here and nowhere else: the seam for a second dialect.
"""
