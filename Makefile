# Dragoman developer tasks. Override PY / VENV, e.g. `make test VENV=.venv311`.

# python3.12 if it runs (the pyenv shim may exist but fail), else pyenv's 3.12, else python3
PY ?= $(shell if python3.12 -V >/dev/null 2>&1; then echo python3.12; \
	elif [ -x /root/.pyenv/versions/3.12.1/bin/python3.12 ]; then echo /root/.pyenv/versions/3.12.1/bin/python3.12; \
	else echo python3; fi)
VENV ?= .venv
PYTHON := $(VENV)/bin/python
EXTRAS ?= test,clients,dev
JOBS ?= 2
PYTEST_ARGS ?=

.PHONY: help install test test-unit test-e2e lint check coverage run bench bench-quick bench-load bench-ledger bench-record bench-limits bench-caching golden fuzz

help:
	@echo "make install   create $(VENV) with $(PY) and install Dragoman editable with [$(EXTRAS)]"
	@echo "make test      pytest -n $(JOBS) over tests/ (e2e included; SDK clients: DRAGOMAN_CLIENT_PYTHON)"
	@echo "make lint      ruff check"
	@echo "make check     ruff + mypy (strict on the translator core); non-zero on any error"
	@echo "make coverage  make test with coverage: per-module table, per-package totals (core >= 90%)"
	@echo "make fuzz      long fuzz run of the stream translator (FUZZ_EXAMPLES=2000 per target)"
	@echo "make golden    regenerate tests/golden/ (every shipped recording x client protocol); review the diff"
	@echo "make run       offline demo: fake openai-chat upstream + mitmdump on 127.0.0.1:8080"
	@echo "make bench     performance benchmark (prints a table, writes bench/results/latest.json)"
	@echo "make bench-load    issue 31: short requests, one stream, 500 paced streams, a burst, vs pass-through mitmdump"
	@echo "make bench-ledger  cost of the usage ledger's add() on the calling thread (prints a table)"
	@echo "make bench-record  recording one 300,000-event stream: RSS growth, worst stall of another flow"
	@echo "make bench-limits  peak RSS under hostile sizes: gzip bomb, huge Content-Length, 20 MiB SSE line, 100 MiB body"

install:
	@test -x $(PYTHON) || $(PY) -m venv $(VENV)
	$(PYTHON) -m pip install -q -U pip
	$(PYTHON) -m pip install -e '.[$(EXTRAS)]'

test:
	@test -x $(PYTHON) || $(MAKE) install   # a fresh clone: set up first
	$(PYTHON) -m pytest -n $(JOBS) -p no:cacheprovider $(PYTEST_ARGS) tests/

test-unit:
	$(PYTHON) -m pytest -n $(JOBS) -p no:cacheprovider -m "not e2e" $(PYTEST_ARGS) tests/

test-e2e:
	$(PYTHON) -m pytest -n $(JOBS) -p no:cacheprovider -m e2e $(PYTEST_ARGS) tests/

lint:
	$(VENV)/bin/ruff check addon tests bench tools
	$(VENV)/bin/ruff format --check addon tests bench tools

check: lint  ## ruff, then mypy as configured in pyproject.toml ([tool.mypy])
	$(VENV)/bin/mypy

coverage:  ## `make test` measured (xdist workers and e2e mitmdump processes too), then per-package totals
	$(MAKE) test PYTEST_ARGS="--cov=dragoman --cov-report=term $(PYTEST_ARGS)"
	$(PYTHON) tools/coverage_by_package.py

golden:  ## regenerate the golden outputs of tests/golden/test_golden.py
	PYTHONPATH=tests $(PYTHON) tests/golden/test_golden.py

FUZZ_EXAMPLES ?= 2000

fuzz:  ## long fuzz run (issue 7): FUZZ_EXAMPLES hypothesis examples per target, random seeds
	DRAGOMAN_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(PYTHON) -m pytest -n $(JOBS) -p no:cacheprovider -q \
		--hypothesis-show-statistics $(PYTEST_ARGS) tests/hardening/test_fuzz_stream.py

run:
	@test -x $(PYTHON) || $(MAKE) install
	@echo "Starting the offline demo (Ctrl-C stops it)."
	$(PYTHON) -m dragoman demo --port 8080 --upstream-port 8765 --target openai-chat

bench:  ## performance benchmark (issue 6): prints one table, writes bench/results/latest.json
	@test -x $(PYTHON) || $(MAKE) install
	$(PYTHON) bench/run.py
	$(PYTHON) bench/load.py
	$(PYTHON) bench/record.py
	$(PYTHON) bench/limits.py
	$(PYTHON) bench/responses_state.py
	$(PYTHON) bench/caching.py
	$(PYTHON) bench/lint.py --mitmdump

bench-load:  ## issue 31: Dragoman vs a pass-through mitmdump under four loads, as ratios (also part of `make bench`)
	@test -x $(PYTHON) || $(MAKE) install
	$(PYTHON) bench/load.py

bench-quick:  ## smoke run of the benchmark (< 2 min)
	@test -x $(PYTHON) || $(MAKE) install
	$(PYTHON) bench/run.py --quick

bench-ledger:  ## usage ledger (issue 15): add() cost on the calling thread, writer throughput
	@test -x $(PYTHON) || $(MAKE) install
	$(PYTHON) bench/ledger.py

bench-record:  ## recorder (issue 23, 3(d)): RSS growth and the worst stall of a concurrent flow while recording
	@test -x $(PYTHON) || $(MAKE) install
	$(PYTHON) bench/record.py

bench-caching:  ## issue 36: share of input tokens read from cache, 10-turn Responses and Chat sessions, main vs this tree
	@test -x $(PYTHON) || $(MAKE) install
	$(PYTHON) bench/caching.py

bench-limits:  ## issue 23, 3(a)(b)(c)(e): mitmdump peak RSS per hostile request (also part of `make bench`)
	@test -x $(PYTHON) || $(MAKE) install
	$(PYTHON) bench/limits.py
