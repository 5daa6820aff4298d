# Two commands on a fresh machine: `make run` trains on the embedded default, `make test` runs the tests.
# Both bootstrap .venv. Without an NVIDIA GPU, torch is pinned to the CPU build (no CUDA download).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.duorl-installed
HAS_GPU := $(shell command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && echo 1)
TORCH_SPEC := $(if $(HAS_GPU),torch>=2.9,torch==2.13.0)
ARGS ?=

.PHONY: run test venv clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[test]"
	touch $(STAMP)

venv: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/duorl train --algo sac --task pendulum_swingup $(ARGS)

test: $(STAMP)
	$(VENV)/bin/duorl assets g1 --if-missing
	$(PY) -m pytest -q tests

clean:
	rm -rf $(VENV) runs
