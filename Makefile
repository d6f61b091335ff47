# Two set-up commands for a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test docs install clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# A CPU torch first: an unpinned torch would pull a multi-GB CUDA build.
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[test,docs]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/holoxmc demo

test: $(STAMP)
	$(PY) -m pytest -q
	$(MAKE) docs

# The docs site (MkDocs + mkdocstrings); --strict turns every warning, a broken link included, into an error.
docs: $(STAMP)
	$(PY) -m mkdocs build --strict --site-dir build/site

clean:
	rm -rf $(VENV) runs .pytest_cache .hypothesis
