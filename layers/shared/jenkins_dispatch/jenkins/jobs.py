"""A row's job as requests to Jenkins name it: the job's URL path from its name (and the names Jenkins refuses),
the job a Jenkins URL names (and whether a queue item's task URL names a row's job), and the form values its parameters are sent as. Pure, no I/O.

Owns no answer of Jenkins (``answers.py`` does); ``store/`` uses it to refuse a job name no Jenkins item can have
and to read parameters with their numbers kept as text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

from ..errors import InvalidJobPath
from ..inputs import control_character

# Characters Jenkins' Util.rawEncode leaves alone; everything else is percent-encoded as UTF-8, uppercase hex.
_RAW_ENCODE_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789!$&'()*+,-._=@")


def raw_encode(segment: str) -> str:
    """Encode one URL path segment exactly like Jenkins' ``Util.rawEncode`` (``Test Job`` → ``Test%20Job``)."""
    return "".join(
        char if char in _RAW_ENCODE_SAFE else "".join(f"%{byte:02X}" for byte in char.encode("utf-8"))
        for char in segment
    )


def job_path_error(job_name: str) -> str | None:
    """Why ``job_name`` can never name a Jenkins item, or None when it can.

    A control character is refused, as Jenkins refuses it in an item's name (``Character.isISOControl``); its other
    unsafe characters are not, since Jenkins gives some items such names itself (a multibranch job's branch
    ``feature/x`` is the item ``feature%2Fx``). A ``.`` or ``..`` segment is refused: Jenkins forbids such item names (``Jenkins.checkGoodName``), and an HTTP
    client resolves them before sending (``job/a/job/../job/b/`` goes out as ``job/a/job/b/``), so ``a/../b`` would
    trigger job ``a/b`` behind the back of ``a/b``'s per-job cap. Percent-encoding them is no way out: requests
    decodes ``%2E`` (an unreserved character) back to ``.`` and then removes the segment.
    """
    if found := control_character(job_name):
        return f"invalid Jenkins job name {job_name!r}: it holds a control character ({found}), which Jenkins refuses"
    segments = job_name.split("/") if job_name else [""]
    if "" in segments:
        return f"invalid Jenkins job name {job_name!r}: folders are separated by single '/'"
    if "." in segments or ".." in segments:
        return f"invalid Jenkins job name {job_name!r}: Jenkins forbids '.' and '..' as job or folder names"
    return None


JOB_NAME_LONGEST = 1024  # the job_name columns' bound, on both engines


def job_name_error(job_name: object) -> str | None:
    """Why the queue cannot take ``job_name`` for a row, a cap, a rate, a pause or a schedule (None: it can): empty
    or blank, longer than the tables hold, or no name a Jenkins item can have (``job_path_error``)."""
    if not isinstance(job_name, str) or not job_name.strip():
        return "job name must not be empty"
    if len(job_name) > JOB_NAME_LONGEST:
        return f"job name must be at most {JOB_NAME_LONGEST} characters, got {len(job_name)}"
    return job_path_error(job_name)


def job_path(job_name: str) -> str:
    """``a/b/c`` → ``job/a/job/b/job/c/``: the job's URL relative to the Jenkins root.

    Raises ValueError for a name that can never name a Jenkins item (see ``job_path_error``): an empty segment
    (``a//b``, a leading or trailing ``/``), or a ``.`` or ``..`` segment, which the HTTP client would resolve.
    """
    error = job_path_error(job_name)
    if error:
        raise InvalidJobPath(error)
    return "".join(f"job/{raw_encode(segment)}/" for segment in job_name.split("/"))


class JsonNumber(str):
    """A JSON number kept as the text it was read from (``1.10`` stays ``1.10``), never turned into a float."""

    __slots__ = ()


def loads_parameters(text: str) -> dict[str, Any]:
    """Parse a row's parameters, read from PostgreSQL as ``parameters::text``, keeping every number as its text.

    jsonb stores numbers as ``numeric``, which keeps their digits, trailing zeros included (``1.10``, ``19.990``),
    but prints an exponent written out (``1E+3`` → ``1000``, ``1e-400`` → ``0.`` and 399 zeros then ``1``,
    ``-1.500e-3`` → ``-0.001500``). Those printed digits are what ``form_value`` sends: no float is involved.
    """
    value = json.loads(text, parse_float=JsonNumber, parse_int=JsonNumber)
    if not isinstance(value, dict):
        raise ValueError("parameters must be a JSON object")
    return value


def dumps_parameters(value: Any) -> str:
    """Compact JSON text (no spaces, non-ASCII as is) in which a JsonNumber is written as its digits: parameters
    read by ``loads_parameters`` written back (or shown) as they were written."""
    return _json_text(value)


def _json_text(value: Any) -> str:
    """Compact JSON text (no spaces, non-ASCII as is) in which a JsonNumber is written as its digits."""
    if isinstance(value, JsonNumber):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{json.dumps(str(k), ensure_ascii=False)}:{_json_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(_json_text(v) for v in value) + "]"
    return json.dumps(value)  # booleans, null, and numbers given as Python ints or floats


def form_value(value: Any) -> str | None:
    """How one of a row's parameters is sent as a ``buildWithParameters`` form field; None: it is not sent.

    * a string: as it is (``"1.10"`` → ``1.10``, ``""`` → an empty value);
    * a number: its JSON text as PostgreSQL's jsonb prints it (see ``loads_parameters``): ``1.10`` → ``1.10``,
      ``19.990`` → ``19.990``, ``12345678901234567890123`` as is, ``1E+3`` → ``1000``, ``1e-400`` → ``0.000…0001``
      (400 decimals) — never through a float;
    * a boolean: ``true`` / ``false``;
    * an array or object: its compact JSON text with numbers kept as above (``{"z":2.50}``); keys come in the
      order jsonb keeps them (shorter keys first, then bytewise), inner nulls stay ``null``;
    * null: None — the field is left out, so Jenkins uses the job's default value for that parameter.
    """
    if value is None:
        return None
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return _json_text(value)


def item_name_key(name: str) -> str:
    """An item name (or path) as Jenkins compares them: ``Jenkins.items`` and a folder's items are maps ordered by
    ``String.CASE_INSENSITIVE_ORDER``, under which two characters are equal when their upper cases, or the lower
    cases of those, are. ``DEPLOY`` names the job ``deploy``."""
    key = []
    for char in name:
        upper = char.upper()
        upper = upper if len(upper) == 1 else char  # Java maps a char to one char: no "SS" for "ß"
        lower = upper.lower()
        key.append(lower if len(lower) == 1 else upper)
    return "".join(key)


def job_path_from_url(url: str | None) -> str | None:
    """The job a Jenkins URL names, as folders joined by '/' (``…/job/team/job/app/42/`` → ``team/app``), or None.

    The one reading of job URLs (queue items' ``task.url``, notifications' ``url`` and build URLs): Jenkins
    spells a job ``job/<name>/`` per folder level after its root (any host and context path). The path's
    segments are URL-decoded once each, as Jenkins encodes them (``Util.rawEncode``). The names are read from the
    first ``job`` segment on, passing over ``view/<name>`` (a view is a way to the job, not part of its name), up
    to the first other segment (a build number, ``console``…). Absolute, relative or malformed (None) alike.
    """
    if not url:
        return None
    try:
        segments = [unquote(s) for s in urlsplit(url).path.split("/") if s]
    except ValueError:  # a host urlsplit refuses
        return None
    if "job" not in segments:
        return None
    names: list[str] = []
    rest = segments[segments.index("job"):]
    while len(rest) >= 2 and rest[0] in ("job", "view"):
        if rest[0] == "job":
            names.append(rest[1])
        rest = rest[2:]
    return "/".join(names) or None


def job_url_matches(task_url: str, job_name: str) -> bool:
    """Whether a queue item's ``task.url`` (absolute, host from Jenkins' own root URL) names ``job_name``.

    Names compare as Jenkins finds items (``item_name_key``): Jenkins spells the job as it was created, the row
    as it was enqueued.
    """
    path = job_path_from_url(task_url)
    return path is not None and [item_name_key(n) for n in path.split("/")] == \
        [item_name_key(n) for n in job_name.split("/")]


def controller_of_url(url: str | None, controllers: Mapping[str, str]) -> str | None:
    """Which controller (name → base URL) an absolute Jenkins URL belongs to: the one whose base URL it starts
    with (the longest, should one contain another's path), scheme and host ignoring case; None for a relative
    URL or one under no controller."""
    if not url:
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if not parts.scheme or not parts.netloc:
        return None
    here = f"{parts.scheme.lower()}://{parts.netloc.lower()}{parts.path}"
    best: tuple[int, str] | None = None
    for name, base in controllers.items():
        b = urlsplit(base)
        prefix = f"{b.scheme.lower()}://{b.netloc.lower()}{b.path.rstrip('/')}/"
        if (here + ("/" if not here.endswith("/") else "")).startswith(prefix) and (best is None or len(prefix) > best[0]):
            best = (len(prefix), name)
    return best[1] if best else None
