"""The docs stay true to the code (issue 34 item 5): a reader who follows them finds what they name.

- every module of the package is named in docs/architecture.md and in its own package's docstring;
- every file a doc, a docstring or a comment of the package cites exists in the repository;
- the architecture page's engine table gives each engine's real migrations, first to last.
"""

from __future__ import annotations

import ast
import io
import re
import subprocess
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "layers" / "shared" / "jenkins_dispatch"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
DIALECTS = PACKAGE / "store" / "dialects"

# A file named in prose: a path or bare name ending in one of the repository's own kinds of file.
CITED_FILE = re.compile(r"(?<![\w./-])((?:[\w.-]+/)*[\w-]+(?:\.[\w-]+)*\.(?:py|sql|md|yaml|yml|toml|json|php|sh|lock))\b")
# Files a command in the docs writes or reads at run time (`> out.json`, `--data @payload.json`), not ours to hold.
MADE_AT_RUN_TIME = {"out.json", "payload.json", "controllers.json", "emulator.json"}


def repository_files() -> list[str]:
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split()
    return [name for name in listed if (ROOT / name).exists()]


FILES = repository_files()


def modules() -> list[Path]:
    return sorted(path for path in PACKAGE.rglob("*.py") if path.name != "__init__.py")


def package_docstring(module: Path) -> str:
    return ast.get_docstring(ast.parse((module.parent / "__init__.py").read_text())) or ""


def exists_in_repository(cited: str) -> bool:
    """A cited file exists when some file's path ends with it: docs name files from the package's root, from
    their folder, or by name alone, as a reader would look them up."""
    cited = cited.lstrip("./")
    return any(name == cited or name.endswith("/" + cited) for name in FILES)


def citations() -> list[tuple[str, str]]:
    """(where, cited file) for every doc page, the README and every comment and docstring of the package."""
    found = []
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    texts = [(page, page.read_text()) for page in pages]
    texts += [(path, prose_of_module(path)) for path in sorted(PACKAGE.rglob("*.py"))]
    texts += [(path, path.read_text()) for path in sorted(PACKAGE.rglob("*.sql"))]
    for path, text in texts:
        for cited in CITED_FILE.findall(text):
            if Path(cited).name not in MADE_AT_RUN_TIME:
                found.append((str(path.relative_to(ROOT)), cited))
    return found


def prose_of_module(path: Path) -> str:
    """A module's comments and strings (its docstrings among them), not its code (``args.json`` is code)."""
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
    return "\n".join(token.string for token in tokens if token.type in (tokenize.COMMENT, tokenize.STRING))


@pytest.mark.parametrize("module", modules(), ids=lambda path: str(path.relative_to(PACKAGE)))
def test_every_module_is_named_in_the_architecture_page(module):
    assert re.search(rf"(?<![\w.]){re.escape(module.name)}\b", ARCHITECTURE.read_text()), \
        f"docs/architecture.md never names {module.relative_to(PACKAGE)}"


@pytest.mark.parametrize("module", modules(), ids=lambda path: str(path.relative_to(PACKAGE)))
def test_every_module_is_named_in_its_packages_docstring(module):
    named = rf"(?<![\w.]){re.escape(module.name)}\b|``{re.escape(module.stem)}``"  # `server.py`, or ``server``
    assert re.search(named, package_docstring(module)), \
        f"{(module.parent / '__init__.py').relative_to(ROOT)}'s docstring never names {module.name}"


def test_every_cited_file_exists_in_the_repository():
    missing = sorted({f"{where}: {cited}" for where, cited in citations() if not exists_in_repository(cited)})
    assert not missing, "cited but not in the repository:\n" + "\n".join(missing)


def migration_range(engine: str) -> str:
    numbers = sorted(path.name[:4] for path in (DIALECTS / engine / "migrations").glob("[0-9][0-9][0-9][0-9]_*.sql"))
    return f"migrations/{numbers[0]}…{numbers[-1]}"


@pytest.mark.parametrize("engine", sorted(path.name for path in DIALECTS.iterdir() if (path / "migrations").is_dir()))
def test_the_engine_table_gives_each_engines_migrations(engine):
    rows = [line for line in ARCHITECTURE.read_text().splitlines() if line.startswith(f"store/dialects/{engine}/")]
    assert rows, f"docs/architecture.md has no engine table row for {engine}"
    assert migration_range(engine) in rows[0], f"{rows[0]!r} should say {migration_range(engine)}"


def test_the_citation_check_finds_a_file_that_is_not_there():
    assert exists_in_repository("store/dialects/postgresql/session.py")
    assert exists_in_repository("README.md")
    assert not exists_in_repository("DESIGN.md")
    assert CITED_FILE.findall("see DESIGN.md, and layers/shared/x.py") == ["DESIGN.md", "layers/shared/x.py"]
