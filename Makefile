# Two set-up commands for a fresh machine: `make demo` (runtime dependencies only) and
# `make test` (adds the test extra). Each set-up step leaves a stamp in the venv, so
# `make demo` then `make test` installs each thing once and re-running is a no-op.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
RUNTIME_STAMP := $(VENV)/.installed-runtime
TEST_STAMP := $(VENV)/.installed-test
TORCH := torch==2.13.0

.PHONY: demo test lint docs install clean

$(PY):
	$(PYTHON) -m venv $(VENV)

# A CPU torch first in every set-up path: an unpinned torch would pull a multi-GB CUDA build.
$(RUNTIME_STAMP): pyproject.toml | $(PY)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q $(TORCH)
	$(PY) -m pip install -q -e .
	touch $@

$(TEST_STAMP): $(RUNTIME_STAMP)
	$(PY) -m pip install -q -e ".[test,docs]"
	touch $@

install: $(RUNTIME_STAMP)

demo: $(RUNTIME_STAMP)
	$(VENV)/bin/holoxmc demo

lint: $(TEST_STAMP)
	$(VENV)/bin/ruff check src tests benchmarks

# Two test processes (pytest-xdist) keep both cores busy: much of the suite is one-core work or
# waits on the processes it starts. Cases that share a cache or a local Ray carry an
# xdist_group mark (one process runs them in turn); the slowest 15 are listed.
test: lint
	$(PY) -m pytest -q -n 2 --dist loadgroup --durations=15
	$(MAKE) docs

# The docs site (MkDocs + mkdocstrings); --strict turns every warning, a broken link included, into an error.
docs: $(TEST_STAMP)
	$(PY) -m mkdocs build --strict --site-dir build/site

clean:
	rm -rf $(VENV) runs .pytest_cache .hypothesis
