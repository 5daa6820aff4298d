#!/usr/bin/env bash
# GPU tests of data parallel at world size 1 (one H200): pytest -m cuda for tests/distributed/test_dp_cuda.py.
#   bash benchmarks/2026-12-01_dp_h200/cuda_tests.sh OUT_DIR
set -uo pipefail
out=${1:?OUT_DIR}
source "$(dirname "$0")/../scripts/device_env.sh"
record_device "$out"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())' | tee "$out/versions.txt"
timeout 560 python3 -m pytest -q -m cuda -p no:cacheprovider --durations=10 tests/distributed/test_dp_cuda.py 2>&1 | tee "$out/pytest_dp_cuda.log"
