"""What an operator may give, checked in one place: whole numbers within the range of the column they are stored
in, names and keys without control characters, a controller that is configured. Pure.

The command line (as its arguments' types, so that argparse names the option), the web page's forms (naming the
field) and the queue itself (naming its argument) call these checks, so that a value is refused alike everywhere,
in one line, before anything is stored: the database never answers `out of range for type integer` to an
operator. Job names are ``jenkins.jobs``' (the names a Jenkins item can have), schedule names
``store.schedules``'; both refuse control characters by ``control_character`` below.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection
from dataclasses import dataclass

from .config import CONTROLLER_NAME
from .errors import InvalidInput

# The columns' types, the same on both engines (PostgreSQL integer / bigint, MySQL INT / BIGINT).
INT_LOWEST, INT_HIGHEST = -(2**31), 2**31 - 1
BIGINT_HIGHEST = 2**63 - 1
_WHOLE = re.compile(r"[+-]?[0-9]+")  # ASCII digits only: int() also reads "٥" and "5_000"


@dataclass(frozen=True)
class Range:
    """The numbers an option takes, ``low`` to ``high`` included (whole numbers when both are ints)."""

    low: int | float
    high: int | float

    def error(self, value: float) -> str | None:
        """Why ``value`` is outside the range (None: it is inside); NaN and the infinities always are."""
        if isinstance(value, float) and not math.isfinite(value) or not self.low <= value <= self.high:
            return f"expected {self.expected()}, got {_shown(value)}"
        return None

    def expected(self) -> str:
        """The range in words: ``a whole number from 0 to 2147483647``."""
        kind = "a whole number" if isinstance(self.low, int) and isinstance(self.high, int) else "a number"
        return f"{kind} from {_shown(self.low)} to {_shown(self.high)}"


def _shown(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


PRIORITY = Range(INT_LOWEST, INT_HIGHEST)  # jenkins_jobs_queue.priority, jenkins_job_schedules.priority
ATTEMPTS = Range(1, INT_HIGHEST)  # jenkins_jobs_queue.max_attempts
CAP = Range(0, INT_HIGHEST)  # jenkins_job_limits.max_in_flight: 0 holds a job back
RATE = Range(1, INT_HIGHEST)  # jenkins_job_limits.per_minute
ID = Range(1, BIGINT_HIGHEST)  # every table's id
HOW_MANY = Range(1, BIGINT_HIGHEST)  # a statement's LIMIT: --limit, --batch, --last, --max-jobs
PORT = Range(0, 65_535)  # 0: any free port
SECONDS = Range(0, INT_HIGHEST)  # a period a page or a loop waits (the page's refresh)
# `prune --older-than`: up to a century back (no finished row is older; 1e300 overflowed MySQL's time arithmetic).
AGE_DAYS = Range(0.0, 36_500.0)
DEDUPE_KEY_LONGEST = 255  # MySQL's VARCHAR(255); PostgreSQL's text is held to it too, so both take the same keys


def whole_number(text: str, allowed: Range) -> int:
    """``text`` (ASCII digits, a sign, blanks around) as a whole number within ``allowed``; InvalidInput saying the
    range otherwise. The message does not name the option: the caller's place does (argparse, the form's field)."""
    stripped = text.strip()
    try:
        value = int(stripped) if _WHOLE.fullmatch(stripped) else None
    except ValueError:  # more digits than Python converts: far out of any range
        value = None
    if value is None or allowed.error(value) is not None:
        raise InvalidInput(f"expected {allowed.expected()}, got {text!r}")
    return value


def number(text: str, allowed: Range) -> float:
    """``text`` as a finite number within ``allowed``; InvalidInput saying the range otherwise."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if allowed.error(value) is not None:
        raise InvalidInput(f"expected {allowed.expected()}, got {text!r}")
    return value


def control_character(text: str) -> str | None:
    """The first control character of ``text`` as ``U+XXXX`` (None: it has none): C0, DEL and C1, what Java's
    ``Character.isISOControl`` calls one, which Jenkins refuses in an item's name (``Jenkins.checkGoodName``).
    Such a character can end a line of a table, or a log's, where the name is shown."""
    for char in text:
        code = ord(char)
        if code < 0x20 or 0x7F <= code <= 0x9F:
            return f"U+{code:04X}"
    return None


def parameter_name_error(name: str) -> str | None:
    """Why ``name`` cannot be a build parameter's (None: it can): empty, or holding a control character."""
    if not name:
        return "a parameter name must not be empty"
    if found := control_character(name):
        return f"parameter name {name!r} holds a control character ({found})"
    return None


def parameters_error(parameters: object) -> str | None:
    """Why ``parameters`` cannot be a row's (None: they can): not a JSON object, or a name ``parameter_name_error``
    refuses."""
    if not isinstance(parameters, dict):
        return "parameters must be a JSON object"
    return next((error for name in parameters if (error := parameter_name_error(str(name)))), None)


def dedupe_key_error(key: str, kind: str = "dedupe") -> str | None:
    """Why ``key`` cannot be a ``kind`` key of a row (None: it can): a control character, or more than 255
    characters (the columns' bound on both engines)."""
    if found := control_character(key):
        return f"{kind} key {key!r} holds a control character ({found})"
    if len(key) > DEDUPE_KEY_LONGEST:
        return f"a {kind} key holds at most {DEDUPE_KEY_LONGEST} characters, got {len(key)}"
    return None


def row_key_error(kind: str, key: str) -> str | None:
    """Why ``key`` cannot be a row's ``kind`` key ("concurrency" or "fairness"; None: it can): empty, or what a
    dedupe key may not be either."""
    if not key:
        return f"a {kind} key is not empty: leave it out for none"
    return dedupe_key_error(key, kind)


def controller_name_error(name: str) -> str | None:
    """Why ``name`` can name no controller (None: it can), by JENKINS_CONTROLLERS' rule."""
    if not CONTROLLER_NAME.match(name):
        return (f"bad controller name {name!r}: lower-case letters, digits, '_' and '-', starting with a letter or "
                "digit (at most 64 characters)")
    return None


def controller_error(name: str, configured: Collection[str]) -> str | None:
    """Why nothing may be stored for controller ``name`` (None: it may): a cap, a rate, a pause or a schedule of a
    controller this process does not have configured would hold or feed rows no dispatcher sends (a row naming an
    unknown controller fails at its first pass)."""
    if error := controller_name_error(name):
        return error
    if name not in configured:
        known = (f"configured: {', '.join(sorted(configured))}" if configured
                 else "none is: set JENKINS_URL or JENKINS_CONTROLLERS")
        return f"controller {name!r} is not configured ({known})"
    return None


_TEMPLATE = re.compile(r"(?:[^{}]|\{[^{}]+\})+")


def key_template_error(kind: str, template: str) -> str | None:
    """Why ``template`` cannot make a row's ``kind`` key (None: it can): what a key may not be, or braces that do not
    pair up. ``{NAME}`` stands for the row's parameter NAME, ``{job}`` for its job name: ``deploy:{ENV}``."""
    if error := row_key_error(kind, template):
        return error.replace(f"{kind} key", f"{kind} key template", 1)
    if not _TEMPLATE.fullmatch(template):
        return (f"{kind} key template {template!r}: each {{ opens a parameter's name, closed by }} "
                "(deploy:{ENV}; {job} is the job name)")
    return None
