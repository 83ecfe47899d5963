"""PostgreSQL (pg8000): the session (``session.py``), its SQL (``queries/``) and migrations, and what this package
asks of the server (``server.py``)."""

from .session import PostgresSession as SESSION

__all__ = ["SESSION"]
