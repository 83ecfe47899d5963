"""The emulator's modules depend one way: config ← model ← views ← control ← server, and its docs agree with its code."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import jenkins_emulator
from jenkins_emulator.config import DEFAULT_CONFIG, Settings

PACKAGE = Path(jenkins_emulator.__file__).parent

# Each module may import only the modules listed for it (within the package).
ALLOWED_IMPORTS = {
    "tree": set(),
    "notify": set(),
    "config": set(),
    "model": {"config", "notify"},
    "views": {"model", "tree"},
    "faults": set(),
    "control": {"model", "views", "faults"},
    "server": {"config", "model", "views", "faults", "control"},
    "__init__": {"config", "faults", "server"},
    "__main__": {"config", "server"},
}


def _package_imports(path: Path) -> tuple[set[str], list[str]]:
    """The package modules a file imports, and where it imports inside a function (the lazy-import trick)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            imported |= {node.module} if node.module else {alias.name for alias in node.names}
    lazy = [f"{path.name}:{inner.lineno}" for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            for inner in ast.walk(node) if isinstance(inner, ast.Import | ast.ImportFrom)]
    return imported, lazy


def test_every_module_has_a_place_in_the_layers() -> None:
    assert {p.stem for p in PACKAGE.glob("*.py")} == set(ALLOWED_IMPORTS)


def test_modules_import_only_the_layers_below_them_and_never_lazily() -> None:
    for path in sorted(PACKAGE.glob("*.py")):
        imported, lazy = _package_imports(path)
        assert imported <= ALLOWED_IMPORTS[path.stem], f"{path.name} imports {sorted(imported - ALLOWED_IMPORTS[path.stem])}"
        assert lazy == [], f"imports inside functions: {lazy}"
        assert "noqa: E402" not in path.read_text(encoding="utf-8"), path.name


def test_every_module_says_what_it_owns() -> None:
    for path in PACKAGE.glob("*.py"):
        assert ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))), path.name


def test_documented_setting_defaults_are_the_code_s() -> None:
    """The package docstring's config example shows, for each setting, what a config that leaves it out gets."""
    documented = dict(re.findall(r'^ {6}"(\w+)": ("[^"]*"|[\w.]+),', jenkins_emulator.__doc__ or "", re.MULTILINE))
    defaults = Settings()
    for name in Settings.__dataclass_fields__:
        assert name in documented, f"{name} is not in the package docstring"
        assert json.loads(documented[name]) == getattr(defaults, name), name


def test_the_default_config_s_differences_are_documented() -> None:
    """The docstring names each setting DEFAULT_CONFIG (no --config) sets differently from an absent key."""
    stated = re.search(r"DEFAULT_CONFIG``.*?of the settings it sets ([^.]*)\.", " ".join((jenkins_emulator.__doc__ or "").split()))
    assert stated, "the package docstring does not say how DEFAULT_CONFIG differs from the defaults"
    pairs = dict(re.findall(r"``(\w+)`` to ``([^`]+)``", stated.group(1)))
    differing = {k: v for k, v in DEFAULT_CONFIG.items() if k in Settings.__dataclass_fields__ and v != getattr(Settings(), k)}
    assert {k: json.loads(v) for k, v in pairs.items()} == differing
