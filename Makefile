# jenkins-dispatch — every target creates or reuses the virtualenv in $(VENV).
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python
export SAM_CLI_TELEMETRY := 0

.PHONY: install install-demo lock test suite test-fast lint bench demo clean chaos

LOCK := layers/shared/requirements.lock
# The layer's own packages at the versions the lock gives the layer (hashes dropped: an editable install cannot
# be hash-checked), so tests and the demo run what is deployed. Only these: pinning what they pull in
# (botocore) would fight the SAM CLI's own pins.
define lock_pins
	sed -n 's/^\(\(pg8000\|pymysql\|requests\|aws-lambda-powertools\|croniter\)==[^ ]*\).*/\1/p' $(LOCK) > $(VENV)/lock-pins.txt
endef

# Everything (the "dev" extra: tests, SAM CLI, linters; and, as with any editable install, the emulator);
# also satisfies `make demo`.
$(VENV)/.installed: pyproject.toml setup.py $(LOCK)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(lock_pins)
	$(PY) -m pip install --quiet -c $(VENV)/lock-pins.txt -e '.[dev]'
	touch $@ $(VENV)/.installed-demo

# `make demo` alone: the package, the "demo" extra (embedded PostgreSQL) and the emulator, not the SAM CLI or
# the test tools.
$(VENV)/.installed-demo: pyproject.toml setup.py $(LOCK)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(lock_pins)
	$(PY) -m pip install --quiet -c $(VENV)/lock-pins.txt -e '.[demo]'
	touch $@

install: $(VENV)/.installed
install-demo: $(VENV)/.installed-demo

# pyproject.toml is the one list of dependencies: regenerate the layer's requirements.txt from it, then pin it
# (and everything it pulls in, with hashes) for the Lambda's Python 3.12 on x86_64 with uv's resolver.
lock: install
	$(PY) -m scripts.layer_requirements --write
	$(VENV)/bin/uv pip compile layers/shared/requirements.txt --python-version 3.12 \
		--python-platform x86_64-manylinux2014 --generate-hashes --custom-compile-command "make lock" \
		--quiet -o $(LOCK)

# The whole suite: lint, then every test against a real PostgreSQL (DATABASE_URL, else 127.0.0.1:5432,
# else an embedded server) and the Jenkins emulator over real HTTP.
# Six workers, each with its own scratch database. On a 2-core machine the run is bound by CPU (2026-12-07, 3,501
# tests, pytest -n 6 idle: 406 s and ~750 CPU-s before, 299 s and 502 CPU-s after four cuts: bytecode cached for the
# suite's ~350 Python processes, no TLS context built per connect, racing children forked from a preloaded fork
# server, the CLI not importing the HTTP client; -n 8 gave 282 s with 542 CPU-s). The workers end within 5 % of each
# other: the time is the sum of the tests', not a tail.
# Workers steal queued tests from each other (--dist worksteal, in pyproject's addopts).
# The chaos runs take 600 jobs here (JD_CHAOS_JOBS); `make chaos` runs them at full size (2,000).
# `make lint` has just run cfn-lint and `sam validate --lint` on template.yaml (lint-sam, when sam.mk is here): the
# suite's tests of the same two commands (tests/system/test_template.py) skip saying so, rather than run them again.
test: install lint
	@JD_TEMPLATE_LINTED=$(if $(wildcard sam.mk),1,) $(MAKE) --no-print-directory suite

# The suite alone, as `make test` runs it, with whatever $(VENV) holds: CI runs it on a second interpreter
# (`make install suite VENV=.venv-second PYTHON=python3.13`). PYTHONDONTWRITEBYTECODE (set on this machine and CI's)
# is cleared for the run: with it, each process the suite starts compiled the package anew (0.33 s of CPU for
# `jenkins-dispatch --help` instead of 0.20 s), and each worker rewrote every test module's asserts.
suite:
	PYTHONDONTWRITEBYTECODE= JD_CHAOS_JOBS=600 $(PY) -m pytest -n 6

chaos: install
	$(PY) -m pytest -s tests/system/test_dispatch_chaos.py tests/system/test_chaos_real_world.py \
		tests/system/test_controllers_chaos.py

# The unit tests only (tests/unit: pure, no database, no emulator, no processes): seconds, stops at the first
# failure. tests/integration and tests/system are in `make test`; `pytest -m integration` picks one layer.
test-fast: install
	$(PY) -m pytest -x tests/unit

# mypy reads its settings ([tool.mypy]: the package, its strictness) from pyproject.toml; any error fails.
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	@if [ -f sam.mk ]; then $(MAKE) --no-print-directory lint-sam; fi

bench: install
	$(PY) -m benchmarks

# `make demo DEMO_ARGS=--two-controllers` (or --keep, --table, ...): python -m demo's flags, docs/development.md.
demo: install-demo
	$(PY) -m demo $(DEMO_ARGS)

clean:
	rm -rf .aws-sam .pytest_cache .ruff_cache .hypothesis

-include sam.mk
