# jenkins-dispatch — every target creates or reuses the virtualenv in $(VENV).
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python
export SAM_CLI_TELEMETRY := 0

.PHONY: install test test-fast lint bench demo clean chaos

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

install: $(VENV)/.installed

# The whole suite: lint, then every test against a real PostgreSQL (DATABASE_URL, else 127.0.0.1:5432,
# else an embedded server) and the Jenkins emulator over real HTTP.
# Two workers (this machine has 2 cores): each gets its own scratch database, so tests never meet.
# The two 2,000-job chaos runs take 800 jobs here; `make chaos` runs them at full size.
test: install lint
	JD_CHAOS_JOBS=800 $(PY) -m pytest -n 2

chaos: install
	$(PY) -m pytest -s tests/test_dispatch_chaos.py tests/test_chaos_real_world.py

test-fast: install
	$(PY) -m pytest -x -q

lint: install
	$(VENV)/bin/ruff check .
	@if [ -f sam.mk ]; then $(MAKE) --no-print-directory lint-sam; fi

bench: install
	$(PY) -m benchmarks

demo: install
	$(PY) -m demo

clean:
	rm -rf .aws-sam .pytest_cache .ruff_cache .hypothesis

-include sam.mk
