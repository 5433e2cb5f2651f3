# Two commands on a fresh machine: `make demo` and `make test`. Both set themselves up.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-dev
CORE   := $(VENV)/.installed-core

.PHONY: demo test test-all lint typecheck bench clean bytecode

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev,dist,validate]'
	@touch $(STAMP) $(CORE)

$(CORE): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e .
	@touch $(CORE)

# The package's bytecode, up to date (only the changed modules are compiled again). A regular
# pip install compiles it; an editable one does not, and where PYTHONDONTWRITEBYTECODE is set
# (as on the project's machines) Python then compiles every infersim module it imports at each
# start: about 20 ms of `infersim --help`, more for a command that imports the engines.
bytecode:
	@$(BIN)/python -m compileall -q infersim

# The main job needs only the core dependencies; the tests also need torch, triton, ray,
# scalesim and kaleido (the dev, dist and validate extras).
demo: $(CORE)
	@$(MAKE) --no-print-directory bytecode
	$(BIN)/infersim demo
	$(BIN)/infersim report

# `make test` leaves out the tests marked slow (the rest of the live SCALE-Sim and Triton
# interpreter runs; it runs a sample of each); `make test-all` runs every test.
test: $(STAMP)
	@$(MAKE) --no-print-directory bytecode
	$(BIN)/ruff check infersim tests benchmarks
	$(BIN)/python -m pytest -m "not slow"

test-all: $(STAMP)
	@$(MAKE) --no-print-directory bytecode
	$(BIN)/ruff check infersim tests benchmarks
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check infersim tests benchmarks
	$(BIN)/mypy infersim

bench: $(STAMP)
	@$(MAKE) --no-print-directory bytecode
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache .hypothesis build *.egg-info
	find infersim -name __pycache__ -type d -prune -exec rm -rf {} +
