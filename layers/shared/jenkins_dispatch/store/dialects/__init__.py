"""One folder per database engine, named as ``DatabaseSettings.engine`` names it: its session class
(``session.py``), its SQL (``queries/``: one file per concern; ``migrations/``) and its server policy.

Everything an engine does differently lives in its folder; the rest of the package sees only the session
contract (``store/session.py``). The engine's driver is imported in its folder and nowhere else.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING

from ...errors import ConfigError

if TYPE_CHECKING:
    from ..session import Session

FOLDER = Path(__file__).parent


def engines() -> list[str]:
    """The engines this package can speak to: every folder here with a ``queries/`` folder."""
    return sorted(path.parent.name for path in FOLDER.glob("*/queries") if path.is_dir())


def session_class(engine: str) -> type[Session]:
    """The session class of ``engine`` (its folder's ``SESSION``), imported on first use: a process loads the
    driver of its own engine only."""
    name = f"{__name__}.{engine}"
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise  # the engine's folder is there; its driver is not installed
        raise ConfigError(f"no database engine {engine!r} (have: {', '.join(engines())})") from None
    return module.SESSION
