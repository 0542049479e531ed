# FedChain's two commands (README.md):
#   make demo   set everything up, then run the demo on a local chain it starts
#   make test   set everything up, then run the whole test suite
# Set-up is idempotent: the Python environment (.venv) and the npm chain tools
# (node_modules) are rebuilt only when pyproject.toml or package-lock.json change.
# npm install (not npm ci) because npm 11 rejects lock files whose optional
# per-platform Anvil packages were not resolved on this platform; the lock file
# still pins every version.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP_FLAGS := --quiet --disable-pip-version-check

# Where the datasets live. A checkout with the project's shared folder beside it
# uses its vendored copies; otherwise set FEDCHAIN_DATA_ROOT yourself.
FEDCHAIN_DATA_ROOT ?= $(if $(wildcard ../shared/data),$(abspath ../shared/data),)
export FEDCHAIN_DATA_ROOT

# Extra arguments: make demo ARGS="--rounds 3", make test ARGS="-k auction".
ARGS ?=

.PHONY: setup demo test clean
.DEFAULT_GOAL := demo

setup: $(VENV)/.installed node_modules/.installed

$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install $(PIP_FLAGS) --upgrade pip
	$(PY) -m pip install $(PIP_FLAGS) -e '.[test]'
	@touch $@

node_modules/.installed: package.json package-lock.json
	npm install --no-audit --no-fund --loglevel=error
	@touch $@

demo: setup
	$(VENV)/bin/fedchain demo $(ARGS)

test: setup
	$(PY) -m pytest $(ARGS)

clean:
	rm -rf $(VENV) node_modules build .fedchain
