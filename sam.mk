# SAM targets, included from the Makefile (`include sam.mk`).
#   make build       sam build (offline except PyPI), the layer via layers/shared/Makefile
#   make deploy      sam deploy --guided the first time (no samconfig parameters yet), then sam deploy
#   make lint-sam    cfn-lint template.yaml + sam validate --lint
#   make layer-size  zipped size of the built layer (target < 5 MB)

VENV ?= .venv
SAM ?= $(VENV)/bin/sam
CFN_LINT ?= $(VENV)/bin/cfn-lint
PYTHON ?= $(VENV)/bin/python
export SAM_CLI_TELEMETRY = 0

# The template's Runtime is python3.12: `sam build` wants a python3.12 on PATH for the functions. Use
# pyenv's when it exists; without one, the layer still builds (layers/shared/Makefile downloads 3.12
# wheels for manylinux2014_x86_64 with any pip) but its .pyc are not precompiled.
PY312_BIN ?= $(firstword $(wildcard /root/.pyenv/versions/3.12.1/bin $(HOME)/.pyenv/versions/3.12.*/bin))
SAM_ENV = $(if $(PY312_BIN),PATH="$(PY312_BIN):$$PATH")

.PHONY: build deploy lint-sam layer-size

build:
	@test -n "$(PY312_BIN)" || echo "sam.mk: no Python 3.12 found; building with $$(command -v python3) (layer wheels are still fetched for 3.12)"
	@start=$$(date +%s.%N); \
	$(SAM_ENV) $(SAM) build --cached --parallel && \
	echo "sam build: $$(echo "$$(date +%s.%N) - $$start" | bc 2>/dev/null || echo '?') s"

deploy: build
	@if grep -q '^parameter_overrides' samconfig.toml 2>/dev/null; then \
		$(SAM) deploy; \
	else \
		echo "sam.mk: first deploy - sam deploy --guided (answers are saved to samconfig.toml)"; \
		$(SAM) deploy --guided; \
	fi

lint-sam:
	$(CFN_LINT) template.yaml
	$(SAM) validate --lint

layer-size:
	@test -d .aws-sam/build/SharedLayer || { echo "no built layer: run make build first" >&2; exit 1; }
	@$(PYTHON) -c 'import io, os, sys, zipfile; \
	root = ".aws-sam/build/SharedLayer"; buf = io.BytesIO(); files = 0; raw = 0; \
	z = zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=9); \
	walk = [(d, f) for d, _, fs in os.walk(root) for f in fs]; \
	[z.write(os.path.join(d, f), os.path.relpath(os.path.join(d, f), root)) for d, f in sorted(walk)]; \
	z.close(); raw = sum(os.path.getsize(os.path.join(d, f)) for d, f in walk); \
	print(f"layer: {len(walk)} files, {raw / 1e6:.1f} MB unzipped, {len(buf.getvalue()) / 1e6:.2f} MB zipped (target < 5 MB; limit 50 MB zipped / 250 MB unzipped with the function)")'
