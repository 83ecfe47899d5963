"""What every command is handed: the settings and a database session, read and opened on first use; and who the
operator is, for the record of a lever pulled."""

from __future__ import annotations

import os
from collections.abc import Callable

from .. import inputs
from ..config import (
    DatabaseSettings,
    Settings,
    load_controllers,
    load_database_settings,
    load_jenkins_settings,
    load_tuning,
)
from ..errors import InvalidInput
from ..store.db import Database, Session
from ..store.levers import Levers
from ..store.producers import Producers


class Context:
    """Settings and a database session, read and opened only when a command needs them: a command reads the
    settings it uses and no others (`migrate` only the database's, so an unfinished Jenkins setup never stops it)."""

    def __init__(self, settings_loader: Callable[[], Settings]):
        self._load = settings_loader
        self._settings: Settings | None = None
        self._database: DatabaseSettings | None = None
        self._tuning_checked = False
        self._db: Session | None = None

    @property
    def settings(self) -> Settings:
        """Every setting, loaded on first use (commands that need none never fail on them)."""
        if self._settings is None:
            self._settings = self._load()
        return self._settings

    @property
    def controllers(self) -> list[str]:
        """The names of the configured controllers: the settings' when loaded, else JENKINS_URL's and
        JENKINS_CONTROLLERS' alone (a cap or a schedule needs no other setting)."""
        if self._settings is not None:
            return list(self._settings.controllers_by_name())
        return [c.name for c in load_controllers(default=load_jenkins_settings())]

    def configured(self, controller: str, option: str = "--controller") -> str:
        """``controller`` when it is configured here; else InvalidInput naming ``option`` (exit 2): something
        stored for it would hold or feed rows no dispatcher sends."""
        if error := inputs.controller_error(controller, self.controllers):
            raise InvalidInput(f"{option}: {error}")
        return controller

    @property
    def database(self) -> DatabaseSettings:
        """The database settings alone (DATABASE_URL or DB_SECRET_ARN, the DB_* limits)."""
        if self._settings is not None:
            return self._settings.database
        if self._database is None:
            self._database = load_database_settings()
        return self._database

    @property
    def db(self) -> Session:
        """The command's database session, opened on first use."""
        if self._db is None:
            self._db = Database(self.database, application_name="jenkins-dispatch-cli")
        return self._db

    @property
    def queue(self) -> Levers:
        """The levers and reports on the command's session, once the dispatch settings are found valid (not
        Jenkins's): a bad one stops the command before it reads or changes anything."""
        self._check_tuning()
        return Levers(self.db)

    @property
    def producers(self) -> Producers:
        """Enqueuing on the command's session, once the dispatch settings are found valid (as ``queue``)."""
        self._check_tuning()
        return Producers(self.db)

    def _check_tuning(self) -> None:
        if not self._tuning_checked and self._settings is None:
            load_tuning()  # raises ConfigError naming the variable
        self._tuning_checked = True

    def close(self) -> None:
        """Close the session if one was opened."""
        if self._db is not None:
            self._db.close()


def operator_name() -> str | None:
    """Who runs this command, for the record of a pause: user@host."""
    import pwd
    import socket

    try:
        return f"{pwd.getpwuid(os.getuid()).pw_name}@{socket.gethostname()}"
    except (KeyError, OSError):
        return None
