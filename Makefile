# FedChain's two commands (README.md):
#   make demo   set everything up, then run the demo on a local chain it starts
#   make test   set everything up, lint (ruff check, ruff format, mypy), then run the whole test suite
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

# The suite runs in this many worker processes (pytest-xdist), each test file whole in one worker, so a module's
# shared chain and runs are set up once. The system tests spend most of their time waiting for blocks (about a
# third of a core each), so 3 workers on 2 cores halve the suite; TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= 3

.PHONY: setup demo test lint clean brownie brownie-compile bindings bench-flower invariants gas-report mutation
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

test: lint
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile $(ARGS)

# The rules are in pyproject.toml ([tool.ruff], [tool.mypy]); `$(VENV)/bin/ruff check --fix .`
# mends most of ruff's findings, `$(VENV)/bin/ruff format .` the format.
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# Brownie pins ~70 exact versions (web3, hypothesis, pytest...), so it gets an
# environment of its own. Offline, the npm compiler stands in for solc: the
# bridge is linked as ~/.solcx/solc-v0.8.37 unless a native solc is there.
BROWNIE_VENV := .venv-brownie
SOLCX_BRIDGE := $(HOME)/.solcx/solc-v0.8.37

brownie: $(BROWNIE_VENV)/.installed

$(BROWNIE_VENV)/.installed:
	@test -x $(BROWNIE_VENV)/bin/python || $(PYTHON) -m venv $(BROWNIE_VENV)
	$(BROWNIE_VENV)/bin/python -m pip install $(PIP_FLAGS) eth-brownie==1.22.2
	@touch $@

brownie-compile: brownie node_modules/.installed
	@test -e $(SOLCX_BRIDGE) || { mkdir -p $(dir $(SOLCX_BRIDGE)) && ln -s $(abspath fedchain/chain/solc_bridge.js) $(SOLCX_BRIDGE); }
	$(BROWNIE_VENV)/bin/brownie compile

# Flower's simulation engine needs Ray (hundreds of MB), so the benchmark against it
# gets an environment of its own layered on .venv (which has Flower itself, for
# fedchain.flower): a .pth file adds .venv's packages behind Ray's, so torch and
# FedChain are not installed twice.
FLOWER_VENV := .venv-flower

$(FLOWER_VENV)/.installed: $(VENV)/.installed
	@test -x $(FLOWER_VENV)/bin/python || $(PYTHON) -m venv $(FLOWER_VENV)
	$(FLOWER_VENV)/bin/python -c "import site, sys; open(site.getsitepackages()[0] + '/fedchain-base.pth', 'w').write('import site; site.addsitedir(%r)\n' % sys.argv[1])" \
		"$$($(PY) -c 'import site; print(site.getsitepackages()[0])')"
	$(FLOWER_VENV)/bin/python -m pip install $(PIP_FLAGS) 'flwr[simulation]==1.42.0'
	# Flower's commands (flwr, flower-superlink...) in this environment's bin, so they run with Ray:
	# `fedchain flower example --simulation` from here.
	$(FLOWER_VENV)/bin/python -m pip install $(PIP_FLAGS) --force-reinstall --no-deps 'flwr==1.42.0'
	@touch $@

# FedChain's trainer against the plain loop and Flower's simulation engine, same run
# (and the environment for `.venv-flower/bin/fedchain flower example --simulation`).
bench-flower: setup $(FLOWER_VENV)/.installed
	$(FLOWER_VENV)/bin/python -m fedchain.cli bench train --flower $(ARGS)

# The contracts' Foundry suite (foundry/, foundry.toml). `make test` runs it bounded (pytest's
# tests/contracts/test_foundry.py); these run a longer invariant campaign, print every entry point's gas,
# and plant bugs of the money flows one at a time to show the suite catches each.
# The native forge of the npm package: its node_modules/.bin launcher does not pass forge's exit status on.
FORGE = $(firstword $(wildcard node_modules/@foundry-rs/forge-*/bin/forge))
INVARIANT_RUNS ?= 2000
INVARIANT_DEPTH ?= 500

invariants: setup
	rm -f build/foundry/campaign.tsv
	FOUNDRY_INVARIANT_RUNS=$(INVARIANT_RUNS) FOUNDRY_INVARIANT_DEPTH=$(INVARIANT_DEPTH) $(FORGE) test --match-contract InvariantsTest --fuzz-seed $$(od -An -N8 -tu8 /dev/urandom | tr -d ' ') $(ARGS)
	$(PY) foundry/campaign.py

gas-report: setup
	$(FORGE) test --match-contract GasScenario --gas-report $(ARGS)

mutation: setup
	$(PY) foundry/mutants.py $(ARGS)

# Regenerate the typed contract bindings after changing contracts/.
bindings: setup
	$(PY) -m fedchain.chain.codegen

clean:
	rm -rf $(VENV) $(BROWNIE_VENV) $(FLOWER_VENV) node_modules build .fedchain
