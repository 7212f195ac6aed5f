# Two commands for a newcomer: `make test` and `make demo`. Both set up .venv themselves.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.edgekit-installed

# The devices tests run a second time under tflite-runtime (what Coral boards ship) with numpy<2,
# without TensorFlow or ai-edge-litert, where a tflite-runtime wheel exists for this Python.
TFLRT_VENV := .venv-tflrt
TFLRT_PY := $(TFLRT_VENV)/bin/python
TFLRT_STAMP := $(TFLRT_VENV)/.edgekit-installed
TFLRT_PACKAGES := 'numpy<2' tflite-runtime==2.14.0 pillow click pytest

# The `remote` tests' board: a Python 3.7 venv like a Coral Dev Board's (Mendel: Debian 10, Python 3.7), with the
# oldest tflite-runtime on PyPI for 3.7 (Mendel ships 2.5). Made once where a Python 3.7 exists (pyenv, apt).
PY37 ?= $(shell for p in $(wildcard $(HOME)/.pyenv/versions/3.7*/bin/python3.7) python3.7; do \
                $$p -c '' 2>/dev/null && { command -v $$p; break; }; done)
PY37_VENV := .venv-py37
PY37_STAMP := $(PY37_VENV)/.edgekit-installed
PY37_PACKAGES := 'numpy<1.22' 'Pillow<10' tflite-runtime==2.7.0

.PHONY: test lint test-tflrt venv-py37 demo venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml Makefile
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[convert,test,detect,plots,onnx]'
	# Keras 2 (tf_keras) for the tests that make Keras-2 artifacts; --no-deps, or pip pulls the 572 MB
	# `tensorflow` wheel beside tensorflow-cpu (pyproject cannot say --no-deps).
	$(PY) -m pip install --quiet --no-deps tf-keras==2.21.0
	@touch $(STAMP)

test: $(STAMP)
	@$(MAKE) --no-print-directory lint
	@$(MAKE) --no-print-directory venv-py37
	$(PY) -m pytest
	@$(MAKE) --no-print-directory test-tflrt

# The style tools pyproject configures (the test extra pins them); mypy runs inside pytest (tests/test_types.py),
# held to its baseline. A failure names the file and line; `ruff format` and `ruff check --fix` repair most.
lint: $(STAMP)
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .

test-tflrt:
	@if $(MAKE) --no-print-directory $(TFLRT_STAMP); then \
	  echo "devices tests again under tflite-runtime ($(TFLRT_VENV), EDGEKIT_BACKEND=tflite_runtime)"; \
	  EDGEKIT_BACKEND=tflite_runtime $(TFLRT_PY) -m pytest -q tests/devices; \
	else \
	  echo "SKIPPED the tflite-runtime leg: could not set up $(TFLRT_VENV) (see pip's message above;" \
	       "usually no tflite-runtime 2.14.0 wheel exists for this Python or platform)"; \
	fi

$(TFLRT_STAMP): pyproject.toml Makefile
	@test -x $(TFLRT_PY) || $(PYTHON) -m venv $(TFLRT_VENV)
	$(TFLRT_PY) -m pip install --quiet --only-binary=:all: $(TFLRT_PACKAGES)
	$(TFLRT_PY) -m pip install --quiet --no-deps -e .
	@touch $(TFLRT_STAMP)

venv-py37:
	@if [ -z "$(PY37)" ]; then \
	  echo "SKIPPED the Python 3.7 board venv: no python3.7 here (pyenv install 3.7.16); the SSH tests use this Python"; \
	elif ! $(MAKE) --no-print-directory $(PY37_STAMP); then \
	  echo "SKIPPED the Python 3.7 board venv: could not set up $(PY37_VENV) (see pip above); the SSH tests use this Python"; \
	fi

$(PY37_STAMP):
	@test -x $(PY37_VENV)/bin/python || $(PY37) -m venv $(PY37_VENV)
	$(PY37_VENV)/bin/python -m pip install --quiet --only-binary=:all: $(PY37_PACKAGES)
	@touch $(PY37_STAMP)

demo: $(STAMP)
	$(PY) demo/demo.py

clean:
	rm -rf $(VENV) $(TFLRT_VENV) $(PY37_VENV) build dist *.egg-info .pytest_cache demo/out
