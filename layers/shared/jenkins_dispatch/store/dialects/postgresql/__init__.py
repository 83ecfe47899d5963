"""PostgreSQL (pg8000): the session, its SQL and migrations, and what this package asks of the server."""

from .session import PostgresSession as SESSION

__all__ = ["SESSION"]
