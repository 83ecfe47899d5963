"""The errors a user can meet. Each message is one line, says what to do, and never holds a secret."""


class DispatchError(Exception):
    """Base class: anything we raise on purpose."""


class ConfigError(DispatchError):
    """A setting is missing or invalid; the message names the variable."""


class DatabaseUnavailable(DispatchError):
    """The database cannot be reached or refused us; the message names the host, never the password."""


class DatabaseBusy(DispatchError):
    """A statement gave up waiting (lock or statement timeout, deadlock): the database works, try again later."""


class InvalidInput(DispatchError):
    """A request or command argument is malformed; nothing was changed."""


class NotFound(DispatchError):
    """The job (or other object) named does not exist."""


class Conflict(DispatchError):
    """The object exists but is not in a state that allows the operation."""


class SchemaMissing(DispatchError):
    """The tables are not there (or not current): `jenkins-dispatch migrate` has not run on this database."""


class MigrationError(DispatchError):
    """The schema could not be brought up to date; nothing was changed (one transaction)."""
