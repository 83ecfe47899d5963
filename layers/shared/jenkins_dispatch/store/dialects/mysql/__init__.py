"""MySQL 8 and MariaDB 10.6+ (PyMySQL): the session, its SQL and migrations, and which servers can hold the
queue."""

from .session import MysqlSession as SESSION

__all__ = ["SESSION"]
