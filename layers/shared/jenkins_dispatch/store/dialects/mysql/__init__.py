"""MySQL 8 and MariaDB 10.6+ (PyMySQL): the session (``session.py``), its SQL (``queries/``) and migrations, and
which servers can hold the queue (``server.py``)."""

from .session import MysqlSession as SESSION

__all__ = ["SESSION"]
