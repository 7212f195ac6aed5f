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

.PHONY: test test-tflrt demo venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml Makefile
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[convert,test]'
	# Keras 2 (tf_keras) for the tests that make Keras-2 artifacts; --no-deps, or pip pulls the 572 MB
	# `tensorflow` wheel beside tensorflow-cpu (pyproject cannot say --no-deps).
	$(PY) -m pip install --quiet --no-deps tf-keras==2.21.0
	@touch $(STAMP)

test: $(STAMP)
	$(PY) -m pytest
	@$(MAKE) --no-print-directory test-tflrt

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

demo: $(STAMP)
	$(PY) demo/demo.py

clean:
	rm -rf $(VENV) $(TFLRT_VENV) build dist *.egg-info .pytest_cache demo/out
