# SAM targets, included from the Makefile (`include sam.mk`).
#   make build           sam build (downloads nothing but the layer's wheels from PyPI) for ARCH (arm64 by default)
#   make build ARCH=x86_64   the same for x86_64; the template's Architecture parameter must say the same
#   make deploy          sam deploy --guided the first time (no samconfig parameters yet), then sam deploy
#   make lint-sam        cfn-lint template.yaml + sam validate --lint
#   make layer-size      zipped size of the built layer (target < 5 MB)
#   make rds-ca-refresh  fetch AWS's current RDS CA bundle into layers/shared and record its SHA-256

VENV ?= .venv
SAM ?= $(VENV)/bin/sam
CFN_LINT ?= $(VENV)/bin/cfn-lint
PYTHON ?= $(VENV)/bin/python
export SAM_CLI_TELEMETRY = 0

# The architecture to build for: samconfig.toml's `Architecture=...` (parameter_overrides) when it names one, so
# build and deploy agree, else the template's default, arm64. `make build ARCH=x86_64` wins over both.
# (sam deploy --guided writes parameter_overrides = "... Architecture=\"x86_64\" ...").
DEPLOY_ARCH := $(or $(shell sed -n '/^parameter_overrides/s/.*Architecture=\\\{0,1\}"\{0,1\}\([a-z0-9_]*\).*/\1/p' samconfig.toml 2>/dev/null | head -n 1),arm64)
ARCH ?= $(DEPLOY_ARCH)
BUILT_ARCH_FILE = .aws-sam/build/architecture
# sam build's cache key ignores LAMBDA_ARCH: one cache per architecture, or ARCH=x86_64 after arm64 would reuse
# the arm64 layer.

# The template's Runtime is python3.12: `sam build` wants a python3.12 on PATH for the functions. Use
# pyenv's when it exists; without one, the layer still builds (layers/shared/Makefile downloads 3.12
# wheels for the Lambda platform with any pip) but its .pyc are not precompiled.
PY312_BIN ?= $(firstword $(wildcard /root/.pyenv/versions/3.12.1/bin $(HOME)/.pyenv/versions/3.12.*/bin))
SAM_ENV = $(if $(PY312_BIN),PATH="$(PY312_BIN):$$PATH") LAMBDA_ARCH=$(ARCH)

RDS_CA_URL ?= https://truststore.pki.rds.amazonaws.com/global/global-bundle.pem
RDS_CA_BUNDLE ?= layers/shared/rds-ca-bundle.pem
CHECK_PYTHON ?= $(shell command -v python3 || command -v python)

.PHONY: build deploy check-deploy-arch lint-sam layer-size rds-ca-refresh

build:
	@case "$(ARCH)" in arm64|x86_64) ;; *) echo "sam.mk: ARCH must be arm64 or x86_64, not '$(ARCH)'" >&2; exit 2;; esac
	@test -n "$(PY312_BIN)" || echo "sam.mk: no Python 3.12 found; building with $$(command -v python3) (layer wheels are still fetched for 3.12)"
	@start=$$(date +%s.%N); \
	$(SAM_ENV) $(SAM) build --cached --cache-dir .aws-sam/cache-$(ARCH) --parallel --parameter-overrides Architecture=$(ARCH) && \
	echo "$(ARCH)" > $(BUILT_ARCH_FILE) && \
	echo "sam build ($(ARCH)): $$(echo "$$(date +%s.%N) - $$start" | bc 2>/dev/null || echo '?') s"

# A layer built for one architecture under functions of the other fails at the first import: sam deploy takes
# Architecture from samconfig.toml (else arm64), so the build must be for that one.
deploy: check-deploy-arch build
	@if grep -q '^parameter_overrides' samconfig.toml 2>/dev/null; then \
		$(SAM) deploy; \
	else \
		echo "sam.mk: first deploy - sam deploy --guided (answers are saved to samconfig.toml; answer Architecture=$(ARCH))"; \
		$(SAM) deploy --guided; \
	fi

check-deploy-arch:
	@test "$(ARCH)" = "$(DEPLOY_ARCH)" || { echo "sam.mk: ARCH=$(ARCH) but sam deploy would deploy Architecture=$(DEPLOY_ARCH): put Architecture=$(ARCH) in samconfig.toml's parameter_overrides" >&2; exit 2; }

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
	arch = open("$(BUILT_ARCH_FILE)").read().strip() if os.path.exists("$(BUILT_ARCH_FILE)") else "?"; \
	print(f"layer ({arch}): {len(walk)} files, {raw / 1e6:.1f} MB unzipped, {len(buf.getvalue()) / 1e6:.2f} MB zipped (target < 5 MB; limit 50 MB zipped / 250 MB unzipped with the function)")'

# The one target that downloads the bundle: AWS's trust store, then a check that it holds certificates
# Python's ssl accepts, then the file and its SHA-256 (review the diff and commit both). The build only checks.
rds-ca-refresh:
	@tmp=$$(mktemp) && trap 'rm -f "$$tmp" "$$tmp.sha256"' EXIT && \
	curl -fsSL --max-time 60 -o "$$tmp" "$(RDS_CA_URL)" || { echo "sam.mk: cannot download $(RDS_CA_URL)" >&2; exit 1; }; \
	$(CHECK_PYTHON) -c 'import hashlib, re, ssl, sys; raw = open(sys.argv[1], "rb").read(); pem = raw.decode("ascii"); \
	certs = re.findall(r"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", pem, re.S); \
	assert certs, "no certificate in the download"; \
	ssl.create_default_context(cadata=pem); \
	open(sys.argv[2], "w").write(hashlib.sha256(raw).hexdigest() + "  " + sys.argv[3] + "\n"); \
	print(f"{len(certs)} certificates")' "$$tmp" "$$tmp.sha256" $(notdir $(RDS_CA_BUNDLE)) && \
	cp "$$tmp" $(RDS_CA_BUNDLE) && mv "$$tmp.sha256" $(RDS_CA_BUNDLE).sha256 && \
	echo "sam.mk: $(RDS_CA_BUNDLE) refreshed from $(RDS_CA_URL); commit it with $(RDS_CA_BUNDLE).sha256"
