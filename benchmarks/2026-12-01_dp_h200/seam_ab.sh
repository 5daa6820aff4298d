#!/usr/bin/env bash
# The synchronizer seam's cost on one H200, in one lease: `duorl bench learner` (FastSAC at the
# g1_walk_flat defaults) from the tree before the seam (ab_old/src: commit 79e478c, carried), the
# current tree with the null synchronizer (the seam alone) and with LocalValidity (what a one-GPU run
# now uses: flat gradient buffers, invalid steps skipped), interleaved.
#   bash benchmarks/2026-12-01_dp_h200/seam_ab.sh OUT_DIR [ROUNDS]
set -uo pipefail
out=${1:?OUT_DIR}; rounds=${2:-1}
source "$(dirname "$0")/../scripts/device_env.sh"
record_device "$out"
new=$PYTHONPATH
for r in $(seq 1 "$rounds"); do
  PYTHONPATH=/tmp/duorl-site:$PWD/ab_old/src python3 -m duorl bench learner --algo sac --task g1_walk_flat --iters 50 \
    --out "$out/seam_before_$r.json" > /dev/null
  PYTHONPATH=$new python3 -m duorl bench learner --algo sac --task g1_walk_flat --iters 50 --synchronizer null \
    --out "$out/seam_null_$r.json" > /dev/null
  PYTHONPATH=$new python3 -m duorl bench learner --algo sac --task g1_walk_flat --iters 50 --synchronizer local \
    --out "$out/seam_local_$r.json" > /dev/null
done
python3 - "$out" "$rounds" <<'PY'
import json, sys
out, rounds = sys.argv[1], int(sys.argv[2])
for r in range(1, rounds + 1):
    row = {arm: json.load(open(f"{out}/seam_{arm}_{r}.json"))["graph_ms_per_iteration"]["median"] for arm in ("before", "null", "local")}
    print(r, {k: round(v, 3) for k, v in row.items()}, "null/before", round(row["null"] / row["before"], 4),
          "local/before", round(row["local"] / row["before"], 4))
PY
