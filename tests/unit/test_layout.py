"""The package layout: which folder may import which, and every module and public name documented.

Pure and fast: reads the source with ``ast``, imports nothing of the package. The rules are the ones each
subpackage's ``__init__`` states; docs/architecture.md draws them.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "layers/shared/jenkins_dispatch"

# Every part of the package may use these: errors, settings, logs and metrics, how a moment is read, and what an
# operator's input may be.
FOUNDATION = {"errors", "config", "observability", "moments", "inputs"}
GROUPS = {"jenkins", "store", "dispatching", "callbacks", "operating", "runtime", "secrets"} | FOUNDATION

# Group (a subpackage, or a top-level module) -> what it may import besides itself. An entry names a group,
# or one module of a group ("jenkins.answers").
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "secrets": {"errors"},
    "config": {"errors", "secrets"},
    "observability": {"errors", "config"},
    "moments": {"errors"},
    "inputs": {"errors", "config"},
    "jenkins": FOUNDATION,
    "store": FOUNDATION | {"jenkins.jobs"},
    "runtime": FOUNDATION | {"store.db"},
    # Nothing of Lambda: the dispatcher function's entry (runtime's settings and session) is lambda_entry.
    "dispatching": FOUNDATION | {"jenkins", "store"},
    "callbacks": FOUNDATION | {"runtime", "store", "jenkins.answers", "jenkins.jobs", "dispatching.decisions"},
    "operating": FOUNDATION | {"jenkins", "store", "dispatching"},
    # The entry points use everything below them; only the CLI starts `serve`.
    "cli": GROUPS | {"__init__", "serve", "ui"},
    "serve": GROUPS | {"ui", "http_service"},
    # The web page: what the CLI uses, never the CLI itself.
    "ui": GROUPS | {"http_service"},
    # The background HTTP server (waitress) and stop signals both services share: nothing of the package.
    "http_service": set(),
    "custom_resource": GROUPS,
    # The dispatcher function's Lambda glue (functions/dispatcher/app.py hands its invocation here).
    "lambda_entry": GROUPS,
}

# Third-party modules that belong to one side: the database driver to store/ (the dialect seam), HTTP clients
# to jenkins/ (and doctor's probe of the webhook URL).
THIRD_PARTY_HOMES = {
    "pg8000": ("store/dialects/postgresql/",),
    "pymysql": ("store/dialects/mysql/",),
    "requests": ("jenkins/", "operating/doctor.py"),
    "urllib3": ("jenkins/",),
    "jinja2": ("ui/",),
    "waitress": ("http_service.py",),
    "croniter": ("dispatching/cron.py",),
}


@cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text())


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _dotted(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE).with_suffix("").parts)


def _group(dotted: str) -> str:
    return dotted.split(".")[0]


def _is_module(dotted: str) -> bool:
    parts = dotted.split(".")
    return PACKAGE.joinpath(*parts).with_suffix(".py").is_file() or PACKAGE.joinpath(*parts).is_dir()


def _package_imports(path: Path) -> set[str]:
    """Every module of the package ``path`` imports, as a dotted name relative to the package."""
    package_parts = _dotted(path).split(".")[:-1]  # a module's package; an __init__'s own package
    found: set[str] = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package_parts[: len(package_parts) - (node.level - 1)]
            elif (node.module or "").split(".")[0] == "jenkins_dispatch":
                base = []
            else:
                continue
            module = (node.module or "").split(".")
            if not node.level:
                module = module[1:]
            target = [p for p in base + module if p]
            for alias in node.names:
                candidate = ".".join(target + [alias.name])
                found.add(candidate if _is_module(candidate) else ".".join(target) or "__init__")
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".", 1)[1] for a in node.names if a.name.startswith("jenkins_dispatch.")}
    return found


@cache
def _third_party_imports(path: Path) -> frozenset[str]:
    names: set[str] = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module.split(".")[0])
    return frozenset(names)


def allowed(importer: str, target: str) -> bool:
    """Whether module ``importer`` may import module ``target`` (both dotted, relative to the package)."""
    group = _group(importer)
    if group == "__init__" or _group(target) == group:
        return True
    return any(target == entry or target.startswith(entry + ".") for entry in ALLOWED[group])


@pytest.mark.parametrize(("importer", "target", "expected"), [
    ("jenkins.client", "jenkins.answers", True),
    ("jenkins.client", "config", True),
    ("jenkins.client", "store.queue", False),
    ("jenkins.answers", "dispatching.decisions", False),
    ("store.queue", "jenkins.jobs", True),
    ("store.queue", "jenkins.answers", False),
    ("store.queue", "jenkins.client", False),
    ("store.db", "runtime", False),
    ("dispatching.dispatcher", "store.queue", True),
    ("dispatching.dispatcher", "callbacks.webhook", False),
    ("dispatching.dispatcher", "operating.operator", False),
    ("dispatching.dispatcher", "cli", False),
    ("dispatching.dispatcher", "runtime", False),
    ("dispatching.dispatcher", "lambda_entry", False),
    ("lambda_entry", "dispatching.dispatch_loop", True),
    ("callbacks.webhook", "dispatching.decisions", True),
    ("callbacks.webhook", "dispatching.dispatcher", False),
    ("callbacks.webhook", "jenkins.client", False),
    ("operating.operator", "dispatching.cancelling", True),
    ("operating.operator", "callbacks.webhook", False),
    ("errors", "config", False),
    ("config", "store.db", False),
    ("serve", "cli", False),
    ("cli", "serve", True),
])
def test_the_rules_refuse_what_the_subpackages_forbid(importer, target, expected) -> None:
    assert allowed(importer, target) is expected


def test_every_import_inside_the_package_follows_the_layout() -> None:
    unplaced = sorted({_group(_dotted(path)) for path in _modules()} - set(ALLOWED) - {"__init__"})
    assert unplaced == [], "a new folder or top-level module: say what it may import in ALLOWED"
    broken = [f"{_dotted(path)} imports {target}" for path in _modules()
              for target in sorted(_package_imports(path)) if not allowed(_dotted(path), target)]
    assert broken == []


def test_the_imports_are_read_at_all() -> None:
    """Guards the test above against a parser that finds nothing (and so forbids nothing)."""
    assert {"jenkins.answers", "jenkins.jobs", "config", "errors"} <= _package_imports(PACKAGE / "jenkins/client.py")
    assert {"store.queue", "jenkins.client", "dispatching.breaker"} <= _package_imports(PACKAGE / "dispatching/dispatcher.py")
    assert {"runtime", "dispatching.dispatch_loop"} <= _package_imports(PACKAGE / "lambda_entry.py")
    assert "operating.bulk" in _package_imports(PACKAGE / "cli/queue.py")


def import_cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected groups of more than one module in ``graph`` (module -> modules it imports)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        for target in graph.get(module, ()):
            if target not in graph:
                continue
            if target not in order:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], order[target])
        if low[module] == order[module]:
            group = set()
            while True:
                member = stack.pop()
                group.add(member)
                if member == module:
                    break
            if len(group) > 1:
                found.append(group)

    for module in sorted(graph):
        if module not in order:
            visit(module)
    return found


def test_import_cycles_are_found() -> None:
    """Guards the test below against a search that finds nothing."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert import_cycles(graph) == [{"a", "b", "c"}]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_itself_through_others() -> None:
    """No cycle between the package's modules, counting imports made inside functions: a lazy import that closes
    a cycle hides a layering mistake (the dispatcher and its loop importing each other was one)."""
    graph = {_dotted(path): _package_imports(path) for path in _modules()}
    cycles = [sorted(c) for c in import_cycles(graph)]
    assert cycles == []


def test_third_party_sides_stay_in_their_folder() -> None:
    strays = [f"{path.relative_to(PACKAGE).as_posix()} imports {name}" for path in _modules()
              for name, homes in THIRD_PARTY_HOMES.items()
              if name in _third_party_imports(path) and not path.relative_to(PACKAGE).as_posix().startswith(homes)]
    assert strays == []


# Engine names as code spells them. Outside the engine folders nothing compares with them: an engine difference
# is a method or a capability of the session (store/session.py), so a third engine is a folder, not an edit
# everywhere. config/database.py is the one exception: it turns what URLs, secrets and DB_ENGINE say into an engine
# name.
ENGINE_WORDS = {"postgresql", "postgres", "mysql", "mariadb"}
ENGINE_HOME = "store/dialects/"
ENGINE_WORDS_READ_IN = ("config/database.py",)


def _names_an_engine(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.strip().lower() in ENGINE_WORDS
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_names_an_engine(element) for element in node.elts)
    return False


def engine_comparisons(source: str) -> list[str]:
    """Where ``source`` tells engines apart by name: a comparison (``==``, ``!=``, ``in``) with an engine's name or
    with ``.dialect`` / ``.engine_name``, or a dict keyed by engine names. As ``line: code``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(_names_an_engine(o) or (isinstance(o, ast.Attribute) and o.attr in ("dialect", "engine_name"))
                   for o in operands):
                found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Dict) and any(key is not None and _names_an_engine(key) for key in node.keys):
            found.append(f"{node.lineno}: a dict keyed by engine names")
    return found


@pytest.mark.parametrize(("source", "caught"), [
    ('if db.dialect == "mysql": pass', True),
    ('if settings.engine != "postgresql": pass', True),
    ('mariadb = "mariadb" in version.lower()', True),
    ('if scheme in ("mysql", "mariadb"): pass', True),
    ('if db.engine_name == name: pass', True),
    ('TOOLS = {"postgresql": 1, "mysql": 2}', True),
    ('if db.supports_listen: pass', False),
    ('label = db.server_label(version)', False),
    ('message = f"cannot reach MySQL at {where}"', False),
    ('if state == "pending": pass', False),
])
def test_engine_comparisons_are_found(source, caught) -> None:
    assert bool(engine_comparisons(source)) is caught


def test_only_the_engine_folders_tell_engines_apart_by_name() -> None:
    """Ask the session (``supports_listen``, ``transactional_ddl``, ``server_label``, ...) instead."""
    found = [f"{path.relative_to(PACKAGE).as_posix()}:{where}" for path in _modules()
             if not path.relative_to(PACKAGE).as_posix().startswith((ENGINE_HOME, *ENGINE_WORDS_READ_IN))
             for where in engine_comparisons(path.read_text())]
    assert found == [], "\n".join(found)


def test_the_engine_folders_hold_every_engine() -> None:
    """Each engine: a folder with its session module, its SQL, its migrations and its server policy."""
    folders = sorted(p for p in (PACKAGE / ENGINE_HOME).iterdir() if p.is_dir() and p.name != "__pycache__")
    assert [p.name for p in folders] == ["mysql", "postgresql"]
    for folder in folders:
        missing = [name for name in ("__init__.py", "session.py", "server.py", "queries", "migrations")
                   if not (folder / name).exists()]
        assert missing == [], f"{folder.name} lacks {missing}"


# "The" Jenkins of a Settings: ``.jenkins`` is the default controller in the loaded settings and one lane's controller
# in ``Settings.for_controller``; ``require_jenkins()`` the same. Read anywhere else, it sends a row of another
# controller to the default one's Jenkins (issue 33: `cancel` of an `eu` row cancelled `default`'s queue item of
# the same number). Only configuration and the dispatcher's lanes, built per controller, may read them; everyone
# else resolves a row's own controller through jenkins/controllers.py.
DEFAULT_CONTROLLER_SHORTCUTS = {"jenkins", "require_jenkins"}
SHORTCUT_HOMES = ("config/settings.py", "dispatching/dispatcher.py", "dispatching/dispatch_loop.py", "dispatching/reconciler.py",
                  "dispatching/breaker.py")


def default_controller_shortcuts(source: str) -> list[str]:
    """Where ``source`` reads an attribute ``jenkins`` or ``require_jenkins`` (of settings, whatever they are
    called), as ``line: code``."""
    return [f"{node.lineno}: {ast.unparse(node)}" for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Attribute) and node.attr in DEFAULT_CONTROLLER_SHORTCUTS]


@pytest.mark.parametrize(("source", "caught"), [
    ("with jenkins_client(settings.require_jenkins()) as c: pass", True),
    ("base = settings.jenkins.url", True),
    ("base = self.settings.jenkins.url if self.settings.jenkins else None", True),
    ("from ..jenkins.client import jenkins_client", False),
    ("client = client_for(settings, row)", False),
    ("url = settings.controller(name).url", False),
])
def test_default_controller_shortcuts_are_found(source, caught) -> None:
    assert bool(default_controller_shortcuts(source)) is caught


def test_only_configuration_and_the_dispatcher_lanes_reach_the_default_controller() -> None:
    """Elsewhere a row's controller comes from ``jenkins/controllers.py`` (its settings, client and links)."""
    found = [f"{path.relative_to(PACKAGE).as_posix()}:{where}" for path in _modules()
             if not path.relative_to(PACKAGE).as_posix().startswith(SHORTCUT_HOMES)
             for where in default_controller_shortcuts(path.read_text())]
    assert found == [], "\n".join(found)


def test_every_module_says_what_it_owns() -> None:
    missing = [path.relative_to(PACKAGE).as_posix() for path in _modules() if not ast.get_docstring(_tree(path))]
    assert missing == []


def _public_definitions(tree: ast.Module):
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and not node.name.startswith("_"):
            yield node.name, node
            if isinstance(node, ast.ClassDef):
                for member in node.body:
                    if isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef) and not member.name.startswith("_"):
                        yield f"{node.name}.{member.name}", member


def test_every_public_function_class_and_method_has_a_docstring() -> None:
    missing = [f"{path.relative_to(PACKAGE).as_posix()}: {name}" for path in _modules()
               for name, node in _public_definitions(_tree(path)) if not ast.get_docstring(node)]
    assert missing == [], f"{len(missing)} undocumented:\n" + "\n".join(missing)


def test_the_configuration_is_imported_through_its_public_face() -> None:
    """``config/__init__.py`` re-exports what the rest of the package uses: a module of ``config/`` imported from
    outside would tie its callers to how the settings happen to be split into groups."""
    reached_inside = [f"{_dotted(path)} imports {target}" for path in _modules()
                      if _group(_dotted(path)) != "config"
                      for target in sorted(_package_imports(path)) if target.startswith("config.")]
    assert reached_inside == []
    assert "config.reading" in _package_imports(PACKAGE / "config/database.py")  # the rule above reads something


# --------------------------------------------------------------------------- a store per audience

# The stores (store/runner.py's Store and its kinds), each named for who uses it. An audience imports its own
# store(s) only: the dispatcher cannot reach a lever, the webhook cannot claim, the page cannot settle a dispatch
# but through an operator's cancel. A key names a group or one module; the most specific key wins.
STORES = {"store.dispatcher", "store.webhook", "store.outcomes", "store.pruning", "store.levers", "store.reports",
          "store.introspection", "store.producers", "store.schedules"}
STORE_AUDIENCES: dict[str, set[str]] = {
    "dispatching": {"store.dispatcher", "store.outcomes", "store.schedules"},  # outcomes: cancelling.py's settle
    "callbacks": {"store.webhook"},
    "operating": {"store.levers", "store.reports", "store.schedules"},
    "operating.doctor": {"store.introspection", "store.reports", "store.schedules"},
    "ui": {"store.levers", "store.reports", "store.schedules"},
    "cli": {"store.levers", "store.reports", "store.producers", "store.schedules"},
    # A store builds on the runner, and on another store only as its base class.
    "store.dispatcher": {"store.runner", "store.outcomes", "store.pruning"},
    "store.webhook": {"store.runner", "store.outcomes"},
    "store.levers": {"store.runner", "store.outcomes", "store.reports", "store.pruning"},
    "store.outcomes": {"store.runner"},
    "store.pruning": {"store.runner"},
    "store.reports": {"store.runner"},
    "store.introspection": {"store.runner"},
    "store.producers": {"store.runner"},
    "store.schedules": {"store.runner"},
}
RUNNER = "store.runner"


def may_use_store(importer: str, target: str) -> bool:
    """Whether module ``importer`` may import ``target`` as far as the stores go (any other import: True)."""
    if target not in STORES | {RUNNER} or importer == target:
        return True
    keys = [key for key in STORE_AUDIENCES if importer == key or importer.startswith(key + ".")]
    return bool(keys) and target in STORE_AUDIENCES[max(keys, key=len)]


@pytest.mark.parametrize(("importer", "target", "expected"), [
    ("dispatching.dispatcher", "store.dispatcher", True),
    ("dispatching.cancelling", "store.outcomes", True),
    ("dispatching.ticking", "store.schedules", True),
    ("dispatching.dispatcher", "store.levers", False),
    ("dispatching.dispatcher", "store.runner", False),
    ("dispatching.dispatcher", "store.queue", True),  # the records are everyone's
    ("callbacks.webhook", "store.webhook", True),
    ("callbacks.webhook", "store.dispatcher", False),
    ("callbacks.webhook", "store.outcomes", False),
    ("operating.operator", "store.levers", True),
    ("operating.overview", "store.reports", True),
    ("operating.operator", "store.introspection", False),
    ("operating.operator", "store.dispatcher", False),
    ("operating.doctor", "store.introspection", True),
    ("operating.doctor", "store.levers", False),
    ("ui.pages", "store.levers", True),
    ("ui.pages", "store.producers", False),
    ("cli", "store.producers", True),
    ("cli", "store.webhook", False),
    ("serve", "store.reports", False),
    ("lambda_entry", "store.dispatcher", False),
    ("store.levers", "store.reports", True),
    ("store.reports", "store.levers", False),
    ("dispatching.duties.pruner", "store.pruning", False),  # through the dispatcher's store, which is a Pruning
    ("store.db", "store.runner", False),
    ("store.schedules", "store.runner", True),
    ("store.migrations", "store.runner", False),
])
def test_the_store_rules_say_who_may_use_which_store(importer, target, expected) -> None:
    assert may_use_store(importer, target) is expected


def test_every_audience_imports_its_own_stores_only() -> None:
    assert {_dotted(path) for path in _modules()} >= STORES | {RUNNER}, "a store named here is missing"
    broken = [f"{_dotted(path)} imports {target}" for path in _modules()
              for target in sorted(_package_imports(path)) if not may_use_store(_dotted(path), target)]
    assert broken == []


def test_the_store_imports_are_read_at_all() -> None:
    """Guards the test above against a parser that finds no store (and so forbids nothing)."""
    assert "store.dispatcher" in _package_imports(PACKAGE / "dispatching/dispatcher.py")
    assert "store.webhook" in _package_imports(PACKAGE / "callbacks/webhook.py")
    assert "store.introspection" in _package_imports(PACKAGE / "operating/doctor.py")  # inside a function
    assert RUNNER in _package_imports(PACKAGE / "store/schedules.py")


def test_one_runner_runs_every_store_statement() -> None:
    """The one ``_run`` (with the one retry of a deadlock victim) is runner.py's: no store defines its own."""
    runs = [f"{_dotted(path)}.{node.name}" for path in _modules() if _dotted(path) in STORES | {RUNNER}
            for cls in _tree(path).body if isinstance(cls, ast.ClassDef)
            for node in cls.body if isinstance(node, ast.FunctionDef) and node.name == "_run"]
    assert runs == ["store.runner._run"]
