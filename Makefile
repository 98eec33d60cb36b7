# Two commands for a fresh machine: `make demo` (install, then the main job) and `make test` (install, then every test).
PYTHON ?= python
PIP := $(PYTHON) -m pip
DEMO_MEMORY ?= demo-memory

.PHONY: install install-test demo test test-order lint bench

install:
	$(PIP) install torch==2.13.0
	$(PIP) install -e .

install-test:
	$(PIP) install torch==2.13.0
	$(PIP) install -e '.[test]'

demo: install
	rm -rf $(DEMO_MEMORY)
	PCM_LLM=$${PCM_LLM:-none} pcm --memory $(DEMO_MEMORY) demo

test: install-test
	$(PYTHON) -m ruff check src tests benchmarks
	$(PYTHON) -m mypy
	lint-imports
	pcm ontology check
	pcm ontology test
	$(PYTHON) -m pytest -q

# The suite in a shuffled order (a new seed each run, printed first; `make test-order SEED=N` repeats one): a test
# that passes only after another fails here.
test-order: install-test
	seed=$${SEED:-$$(date +%s)}; echo "pytest-randomly seed $$seed"; $(PYTHON) -m pytest -q -p randomly --randomly-seed=$$seed

bench:
	$(PYTHON) benchmarks/bench_store.py
