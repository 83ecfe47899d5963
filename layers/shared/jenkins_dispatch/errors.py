"""Every error the package raises on purpose, all under ``DispatchError``.

Each message is one line, says what to do, and never holds a secret; each class's docstring says what the
user (operator, Jenkins admin, or whoever sent the request) should do about it. The CLI turns the classes in
``OPERATION_FAILED`` into exit 1 and every other ``DispatchError`` into exit 2 (bad input, nothing changed).

Four exceptions are not here on purpose: they steer control flow inside one module and never leave it.
``jenkins/client.py`` has ``_NotSent`` (with ``_NoTimeLeft``, not sent because the operation's time was spent) and
``_MaybeSent`` (whether a failed request may have reached Jenkins, turned into a trigger outcome or one of the
errors below before the client returns); ``dispatching/dispatcher.py`` has ``_PassStopped`` (Jenkins as a whole
failed: the pass ends and says why in its summary).
"""


class DispatchError(Exception):
    """Base class: anything we raise on purpose. Catch this to catch every error a user can meet."""


# --------------------------------------------------------------------------- settings and input


class ConfigError(DispatchError):
    """A setting is missing or invalid: set the variable the message names (``jenkins-dispatch doctor`` checks
    them all) and start again."""


class InvalidInput(DispatchError):
    """A request or command argument is malformed; nothing was changed: correct the value the message names
    and send it again."""


class InvalidJobPath(InvalidInput, ValueError):
    """A job name that can never name a Jenkins item (an empty, ``.`` or ``..`` folder segment): enqueue it
    under the job's real path, folders separated by single '/'. Still a ValueError, as it always was."""


class RejectedNotification(InvalidInput):
    """A webhook request that cannot be acted on (``http_status``: the answer to give, 400 or 413): whoever
    configured the Notification plugin sends what the message asks for instead."""

    def __init__(self, message: str, http_status: int = 400):
        super().__init__(message)
        self.http_status = http_status


class ControllerNotConfigured(InvalidInput):
    """A row or a command names a Jenkins controller that is not in the configuration (JENKINS_URL or
    JENKINS_CONTROLLERS): name a configured one, or put that controller back in the configuration. ``name``: the
    controller named."""

    def __init__(self, name: str, configured: list[str]):
        known = ", ".join(configured) if configured else "none"
        super().__init__(f"controller {name!r} is not configured (configured: {known}; JENKINS_URL, "
                         "JENKINS_CONTROLLERS)")
        self.name = name


class NotFound(DispatchError):
    """The job (or other object) named does not exist: check the id (``jenkins-dispatch ls``)."""


class Conflict(DispatchError):
    """The object exists but is not in a state that allows the operation: look at it (``jenkins-dispatch
    show``) and choose the operation its state allows."""


# --------------------------------------------------------------------------- the database


class DatabaseUnavailable(DispatchError):
    """The database cannot be reached or refused us; the message names the host, never the password: check
    DATABASE_URL / the network / the credentials, then try again."""


class DatabaseBusy(DispatchError):
    """A statement gave up waiting (lock or statement timeout, deadlock): the database works, try again later.
    ``victim``: the server chose its transaction as a deadlock (or serialization) victim and rolled it back at
    once, so running it again costs no wait and, outside a caller's transaction, repeats nothing."""

    def __init__(self, message: str, *, victim: bool = False):
        super().__init__(message)
        self.victim = victim


class DatabaseError(DispatchError):
    """A statement the database refused (a lost session is DatabaseUnavailable instead), in one line without
    secrets: read the server's reason in the message. ``code``: the SQLSTATE (PostgreSQL) or error number
    (MySQL) as text; ``constraint``: the rule the data broke, when the server names one; ``invalid_input``: the
    data broke a rule (a constraint, a format), rather than the statement failing to run; ``duplicate_key``: of
    those, a unique key already held the value (a committed row's, or one that another session had inserted and
    has since committed: the statement, run again, meets that row)."""

    def __init__(self, message: str, *, code: str | None = None, constraint: str | None = None,
                 invalid_input: bool = False, duplicate_key: bool = False):
        super().__init__(message)
        self.code = code
        self.constraint = constraint
        self.invalid_input = invalid_input
        self.duplicate_key = duplicate_key


class SchemaMissing(DispatchError):
    """The tables are not there (or not current): run `jenkins-dispatch migrate` on this database."""


class StatementError(DispatchError, ValueError):
    """A SQL file of the package cannot be loaded (a packaging or editing mistake): fix the file the message
    names, or reinstall the package."""


class MigrationError(DispatchError):
    """The schema could not be brought up to date: fix what the message names and run `jenkins-dispatch migrate`
    again. On PostgreSQL a migration is one transaction (nothing of it stays); on MySQL, where DDL commits as it
    goes, every step is written to be run again, so the next run carries on where this one stopped."""


# --------------------------------------------------------------------------- Jenkins


class JenkinsError(DispatchError):
    """Base of the errors about Jenkins as a whole (not one job): the dispatcher stops its pass on these."""


class JenkinsUnavailable(JenkinsError):
    """Jenkins cannot be reached, is (re)starting, failed, or answered something unusable: check JENKINS_URL
    and that Jenkins is up; the dispatcher tries again by itself."""


class JenkinsRequestFailed(JenkinsUnavailable):
    """One request failed in a way a single request can — no answer in time, a 500, an answer that is not
    Jenkins's — while Jenkins itself may be fine: the dispatcher weighs it as evidence about the job it was
    about, and decides that Jenkins as a whole is down only after several in a row (its breaker)."""


class JenkinsAuthRejected(JenkinsError):
    """Jenkins refused our credentials or their permissions: check JENKINS_USER / JENKINS_API_TOKEN and the
    user's permissions (Job/Build and Job/Read; Job/Cancel to cancel)."""


class SearchInconclusive(DispatchError):
    """A search for a dispatch in Jenkins cannot say it is absent: too many builds to read back to the dispatch
    time, or an answer too large to read (the reason says which). A problem of this search, not of Jenkins:
    look for the build in Jenkins by hand (its DISPATCH_ID parameter), then settle or retry the row."""


# The errors that mean "the operation failed, the input was fine" (CLI exit 1); any other DispatchError is bad
# input (exit 2).
OPERATION_FAILED: tuple[type[DispatchError], ...] = (
    DatabaseUnavailable, DatabaseBusy, DatabaseError, MigrationError, SchemaMissing, JenkinsError, SearchInconclusive,
)
