"""One folder per database engine, named as ``DatabaseSettings.engine`` names it: its session class
(``session.py``), its SQL (``queries.sql``, ``migrations/``) and its server policy.

Everything an engine does differently lives in its folder; the rest of the package sees only the session
contract (``store/session.py``). The engine's driver is imported in its folder and nowhere else.
"""
