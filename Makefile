# The two commands of the README:
#   make course   — set up .venv if needed, then open JupyterLab on notebooks/
#   make test     — set up .venv and system services if needed, then run every test
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
BIN    := $(VENV)/bin
EXTRAS := notebook,agent,postgres,scale,embeddings,browser,dev
STAMP  := $(VENV)/.memlib-installed

.PHONY: install course test system-deps lint stress clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[$(EXTRAS)]'
	@touch $@

install: $(STAMP)

# Root (a container, a CI box) needs --allow-root; everyone else gets the plain command.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)

course: $(STAMP)
	$(BIN)/jupyter lab --notebook-dir=notebooks $(ALLOW_ROOT)

system-deps:
	@bash scripts/system-deps.sh

test: $(STAMP) system-deps
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check memlib tests
	$(BIN)/mypy

stress: $(STAMP)
	$(BIN)/python -m pytest -m stress tests

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build *.egg-info
