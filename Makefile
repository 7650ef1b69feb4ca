# The two commands of the README, and what CI runs before the tests. Each sets up everything it
# needs on a fresh machine.
#   make quickstart   create .venv, install klog, run examples/quickstart.py
#   make test         create .venv, install klog with its test tools, run the test suite
#   make lint         create .venv, install klog with its test tools, ruff check + mypy
#   make notebooks    run every notebook (in a temporary dir) and store its outputs and plots in the .ipynb
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.klog-installed

.PHONY: quickstart test bench lint notebooks clean

$(STAMP): pyproject.toml setup.py storage_core/record/_kernel.c
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[spark,dev]' --config-settings editable_mode=compat
	touch $(STAMP)

quickstart: $(STAMP)
	$(PY) examples/quickstart.py

test: $(STAMP)
	$(PY) -m pytest -n 2

bench: $(STAMP)
	$(PY) -m benchmarks

notebooks: $(STAMP)
	$(PY) notebooks/execute.py

lint: $(STAMP)
	$(VENV)/bin/ruff check storage_core spark_logsource tests benchmarks examples
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) build *.egg-info storage_core/record/*.so klog-data
