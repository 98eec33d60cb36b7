# Two commands for a fresh machine: `make demo` (install, then the main job) and `make test` (install, then every test).
# While working: `make check` (the fast tests, in parallel, with its wall time) and `make lint` (ruff, mypy, layers).
PYTHON ?= python
PIP := $(PYTHON) -m pip
DEMO_MEMORY ?= demo-memory
# pytest-xdist workers for `make check` (`make check JOBS=2`)
JOBS ?= auto

.PHONY: install install-test demo test check test-order lint bench

install:
	$(PIP) install torch==2.13.0
	$(PIP) install -e .

install-test:
	$(PIP) install torch==2.13.0
	$(PIP) install -e '.[test]'

demo: install
	rm -rf $(DEMO_MEMORY)
	PCM_LLM=$${PCM_LLM:-none} pcm --memory $(DEMO_MEMORY) demo

lint:
	$(PYTHON) -m ruff check src tests benchmarks
	$(PYTHON) -m mypy
	lint-imports

# The whole suite, serial, after the linters and the ontology's own checks (what CI runs).
test: install-test
	$(MAKE) --no-print-directory lint
	pcm ontology check --vocab src/pcm/ontology_tools/standard_vocab
	pcm ontology test
	$(PYTHON) -m pytest -q

# The fast inner loop: every test but those marked slow, browser, engine or model (pyproject.toml), in parallel
# (pytest-xdist; a module's tests stay on one worker, so a module fixture is built once). No install step: run
# `make install-test` (or `make test`) once first.
check:
	@start=$$(date +%s); \
	$(PYTHON) -m pytest -q -n $(JOBS) --dist loadscope -m "not slow and not browser and not engine and not model"; \
	status=$$?; echo "make check: $$(( $$(date +%s) - start )) s wall time"; exit $$status

# The suite in a shuffled order (a new seed each run, printed first; `make test-order SEED=N` repeats one): a test
# that passes only after another fails here.
test-order: install-test
	seed=$${SEED:-$$(date +%s)}; echo "pytest-randomly seed $$seed"; $(PYTHON) -m pytest -q -p randomly --randomly-seed=$$seed

bench:
	$(PYTHON) benchmarks/bench_store.py
