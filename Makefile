# The two commands of the README:
#   make course   — set up .venv if needed, then open JupyterLab on notebooks/
#   make check    — set up .venv and system packages if needed, then lint (ruff, mypy)
#                   and run every test (unit tests and nbval over each notebook's solution editions)
# and, for the inner loop, make quick (unit tests only).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
BIN    := $(VENV)/bin
EXTRAS := notebook,agent,mcp,postgres,scale,embeddings,browser,dev
STAMP  := $(VENV)/.memlib-installed

.PHONY: install course check test quick system-deps lint stress clean

# Every version the course and the tests see is pinned by constraints.txt.
$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[$(EXTRAS)]'
	@touch $@

install: $(STAMP)

# Root (a container, a CI box) needs --allow-root; everyone else gets the plain command.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)

course: $(STAMP)
	$(BIN)/jupyter lab --notebook-dir=notebooks $(ALLOW_ROOT)

system-deps:
	@bash scripts/system-deps.sh

check: lint test

test: $(STAMP) system-deps
	$(BIN)/python -m pytest

# The inner loop: unit tests only, first failure stops (no notebooks, no browser).
quick: $(STAMP)
	$(BIN)/python -m pytest -o addopts="" -q -x -m "not stress and not browser" tests

lint: $(STAMP)
	$(BIN)/ruff check memlib tests benchmarks
	$(BIN)/ruff format --check memlib tests benchmarks
	$(BIN)/mypy
	$(BIN)/mypy tests

# The fuzz targets (tests/fuzz) at full size: over a million seeded cases at scale 1;
# their counts are in the terminal summary and in memlib-fuzz-report.json in the temp
# folder ($MEMLIB_FUZZ_REPORT elsewhere). One process (-n 0), as its time bounds were set.
stress: $(STAMP)
	MEMLIB_FUZZ_SCALE=$${MEMLIB_FUZZ_SCALE:-1} $(BIN)/python -m pytest -m stress -n 0 tests

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build *.egg-info
