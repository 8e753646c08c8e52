# Everyday commands; each is one line so it can be copied into a shell as well.
PYTHON ?= .venv/bin/python
JOBS ?= 2

.PHONY: test test-fast lint format tables

test:  ## the whole suite, as CI runs it
	$(PYTHON) -m pytest -q -n $(JOBS) tests/

test-fast:  ## unit and fit tests without the slow ones (about five minutes on two cores)
	$(PYTHON) -m pytest -q -n $(JOBS) -m "not slow" tests/unit tests/fit

lint:
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .

format:
	$(PYTHON) -m ruff check --fix .
	$(PYTHON) -m ruff format .

tables:  ## rebuild the regime study's tables and figures from the committed logs
	PATH=$(dir $(PYTHON)):$$PATH bash scripts/make_tables.sh
