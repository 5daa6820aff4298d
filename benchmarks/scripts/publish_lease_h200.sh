#!/usr/bin/env bash
# One device call for issues #41/#42 after the wheels are staged (all five parts: ../shared/tools/device-mjlab.md):
#   1. start-up, g1_walk_flat cold then warm (startup_h200.sh; a fresh machine's first run is the cold case),
#      which also fills the walk caches that steps 2 and 3 reuse;
#   2. the weight board's CUDA tests (tests/runtime/test_weights_cuda.py: the event wait, its control, a run);
#   3. the publish A/B on g1_walk_flat (weight_publish_ab_h200.sh, ARMS default "sync event").
# On the GPU machine, from the repo root:
#   bash benchmarks/scripts/publish_lease_h200.sh "$OUT"        # about 480 s; BUDGET_S (default 500) bounds it
# Files back (6 of the 8 a call returns): OUT/startup/{gpu,commit,logs,runs,table}.* and OUT/publish.tgz
# (the A/B's table, rows and log, and the CUDA tests' log).
set -uo pipefail
out=${1:?OUT_DIR}
budget=${BUDGET_S:-500}
t0=$(date +%s)
left() { echo $(( budget - ($(date +%s) - t0) )); }
source "$(dirname "$0")/device_env.sh"
BUDGET_S=130 bash "$(dirname "$0")/startup_h200.sh" "$out/startup" walk_cold walk_warm
pub=/tmp/pubout
rm -rf "$pub" && mkdir -p "$pub"
use_caches /tmp/duorl-startup-caches/walk  # the walk arms' caches, warm now (the A/B uses them too)
timeout 120 python3 -m pytest -m cuda -q -p no:cacheprovider tests/runtime/test_weights_cuda.py tests/runtime/test_deferred_rows_cuda.py > "$pub/pytest_weights_cuda.log" 2>&1
echo "pytest rc=$? at $(( $(date +%s) - t0 )) s" | tee -a "$pub/pytest_weights_cuda.log"
tail -3 "$pub/pytest_weights_cuda.log"
BUDGET_S=$(( $(left) - 10 )) RUN_S=${RUN_S:-75} ARMS=${ARMS:-sync event} bash "$(dirname "$0")/weight_publish_ab_h200.sh" "$pub"
tar czf "$out/publish.tgz" -C "$pub" .
