# Two commands for a newcomer: `make test` and `make demo`. Both set up .venv themselves.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.edgekit-installed

.PHONY: test demo venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml Makefile
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[convert,test]'
	@touch $(STAMP)

test: $(STAMP)
	$(PY) -m pytest

demo: $(STAMP)
	$(PY) demo/demo.py

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache demo/out
