# Two commands on a fresh machine: `make run` trains on the embedded default, `make test` runs the tests.
# Both bootstrap .venv. Without an NVIDIA GPU, torch is pinned to the CPU build (no CUDA download).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.duorl-installed
HAS_GPU := $(shell command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && echo 1)
comma := ,
# the GPU build gets pyproject.toml's torch range (the newest tested release below its bound)
TORCH_SPEC := $(if $(HAS_GPU),torch>=2.9$(comma)<2.14,torch==2.13.0)
TORCH_NOTE := $(if $(HAS_GPU),an NVIDIA GPU is visible: the CUDA build,no NVIDIA GPU: the CPU build)
ARGS ?=

.PHONY: run test test-fast venv clean

# pip stays quiet (-q): the echo lines say what each silent minute is for
$(STAMP): pyproject.toml
	@echo "duorl: one-time setup of $(VENV) (about 2.4 GB; later runs skip this)"
	@echo "duorl: [1/4] creating $(VENV) with $(PYTHON)"
	$(PYTHON) -m venv $(VENV)
	@echo "duorl: [2/4] upgrading pip"
	$(PY) -m pip install -q --upgrade pip
	@echo "duorl: [3/4] installing PyTorch $(TORCH_SPEC) ($(TORCH_NOTE))"
	$(PY) -m pip install -q "$(TORCH_SPEC)"
	@echo "duorl: [4/4] installing duorl and its dependencies: MuJoCo + MuJoCo Warp + warp-lang (physics), OmegaConf, TensorBoard, matplotlib, ONNX, mjlab (its tasks) and the test tools"
	@# the torch of step 3 stays: mjlab's rsl-rl-lib pulls torchvision, whose newest wheel pins the newest torch
	$(PY) -c "import torch; print('torch==' + torch.__version__.split('+')[0])" > $(VENV)/torch-pin.txt
	$(PY) -m pip install -q -e ".[test]" -c $(VENV)/torch-pin.txt
	touch $(STAMP)
	@echo "duorl: $(VENV) is ready"

venv: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/duorl train --algo sac --task pendulum_swingup $(ARGS)

# two pytest workers: most tests wait on the processes they start, so two share two cores well.
# worksteal: each worker starts with one contiguous half of the tests (tests/conftest.py puts the three
# learning runs first) and one that runs dry takes half of the other's remaining queue, so neither idles
# at the end and a module's tests mostly stay on one worker (its module-scoped run is made once)
test: $(STAMP)
	$(VENV)/bin/duorl assets g1 --if-missing
	$(PY) -m pytest -q -n 2 --dist worksteal tests

# the inner loop: the suite without the tests marked slow (10 s or more each: learning runs, real duo and
# data-parallel runs). `make test` stays the full suite and CI's command. The -m here replaces
# pyproject's `-m 'not cuda'`, so it repeats it.
test-fast: $(STAMP)
	$(VENV)/bin/duorl assets g1 --if-missing
	$(PY) -m pytest -q -n 2 --dist worksteal -m "not slow and not cuda" tests

clean:
	rm -rf $(VENV) runs
