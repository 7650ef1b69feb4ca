# The two commands of the README (make quickstart, make test), and what CI runs before the tests. Each sets up everything it
# needs on a fresh machine.
#   make quickstart   create .venv, install klog with Spark, run examples/quickstart.py
#   make test         create .venv, install klog with Spark and the test tools, run the test suite
#   make lint         the same install, ruff check + mypy
#   make docs        build the docs site (mkdocs, strict) into site/; `.venv/bin/mkdocs serve` shows it live
#   make notebooks    run every notebook (in a temporary dir) and store its outputs and plots in the .ipynb
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# what the install depends on: a change reinstalls (and rebuilds the native kernel)
SOURCES := pyproject.toml setup.py $(wildcard storage_core/record/_kernel_src/*.[ch])
RUN_STAMP := $(VENV)/.klog-installed
DEV_STAMP := $(VENV)/.klog-dev-installed

.PHONY: quickstart test bench lint notebooks docs clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(RUN_STAMP): $(VENV)/bin/python $(SOURCES)
	$(PY) -m pip install -q -e '.[spark]'
	touch $(RUN_STAMP)

$(DEV_STAMP): $(RUN_STAMP)
	$(PY) -m pip install -q -e '.[spark,dev]'
	touch $(DEV_STAMP)

quickstart: $(RUN_STAMP)
	$(PY) examples/quickstart.py
	@echo "klog is installed in $(VENV): run $(VENV)/bin/klog --help, or '. $(VENV)/bin/activate' to put klog on the PATH"

test: $(DEV_STAMP)
	$(PY) -m pytest -n 2 --dist loadfile --no-loadscope-reorder

bench: $(DEV_STAMP)
	$(PY) -m benchmarks

notebooks: $(DEV_STAMP)
	$(PY) notebooks/execute.py

docs: $(DEV_STAMP)
	$(PY) -m mkdocs build --strict

lint: $(DEV_STAMP)
	$(VENV)/bin/ruff check storage_core spark_logsource tests benchmarks examples
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) build *.egg-info storage_core/record/*.so klog-data klog-data-checkpoints site
