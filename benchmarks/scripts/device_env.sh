# Sourced by the GPU benchmark scripts, which run on the device machine from the repo root after the
# wheels are staged (../shared/tools/device-wheels.sh): puts the staged site and src on the path, points
# the G1 tasks at the staged model, and defines `record_device OUT_DIR`, which writes the GPU's name,
# driver and memory (gpu.txt) and the checkout's HEAD (commit.txt; the device copy's git metadata can lag
# the working tree that travelled, so each result's README names the tree) into OUT_DIR.
export PYTHONPATH=/tmp/duorl-site:$PWD/src DUORL_G1_XML=/tmp/duorl-site/assets/g1/g1.xml PYTHONUNBUFFERED=1
record_device() {
  mkdir -p "$1"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$1/gpu.txt"
  git rev-parse HEAD > "$1/commit.txt" 2>/dev/null || true
}
# `use_caches DIR`: Warp's, Inductor's, CUDA's and duorl's caches under DIR, laid out as startup_h200.sh's
# caches() lays out each arm's (so a later step can reuse an arm's, e.g. /tmp/duorl-startup-caches/walk)
use_caches() {
  mkdir -p "$1"
  export WARP_CACHE_PATH=$1/warp TORCHINDUCTOR_CACHE_DIR=$1/inductor CUDA_CACHE_PATH=$1/cuda DUORL_CACHE_DIR=$1/duorl
}
