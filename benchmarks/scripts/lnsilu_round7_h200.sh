#!/usr/bin/env bash
# Issue #41, round 7 in one device call: the LayerNorm+SiLU microbenchmark decides, the learner measures.
#   1. layer_norm_silu_bench_h200.py: torch.compile's blocks, the v1 backward and every v2 config of
#      fused_norm.V2_SWEEP per sac shape (correctness against fp32 torch, then CUDA-graph timings);
#   2. the decision: the v2 config with the least forward + backward time summed over the critic's three
#      shapes ([2, 16384, 768/384/192], most of the bytes) against the compiled blocks' sum;
#   3. the CUDA kernel tests (tests/gpu/test_fused_norm.py) with that config;
#   4. if it beats the compiled blocks: the learner with it (`DUORL_LNSILU_BWD=<config>`), `before` against
#      `fused` and `fused_bias`, sac with and without symmetry (learner_round6_h200.sh's harness); else no
#      learner run (the compiled blocks stay the default and the microbenchmark is the evidence).
# On the GPU machine, from the repo root, after staging the wheels (../shared/tools/device-wheels.sh):
#   BUDGET_S=560 bash benchmarks/scripts/lnsilu_round7_h200.sh "$OUT"
# Stays within BUDGET_S (default 560) seconds. Files (8 at most, what the device returns): OUT/lnsilu.json,
# OUT/round7.log (the microbenchmark's console, the decision, the kernel tests), and OUT/round7/ from
# learner_round6_h200.sh (gpu.txt, commit.txt, bench.log, sac_sym.json, sac_nosym.json, table.txt).
# DRY=1 runs steps 2 and 4's logic on an existing OUT/lnsilu.json without a GPU (prints the decision and
# the command it would run).
set -uo pipefail
out=${1:?OUT_DIR}
mkdir -p "$out"
budget=${BUDGET_S:-560}
log=$out/round7.log
if [ "${DRY:-0}" != 1 ]; then
  source "$(dirname "$0")/device_env.sh"
  echo "+ microbenchmark (limit 200 s)" | tee "$log"
  timeout 200 python3 benchmarks/scripts/layer_norm_silu_bench_h200.py --out "$out/lnsilu.json" >> "$log" 2>&1
  echo "microbenchmark rc=$? at ${SECONDS} s" | tee -a "$log"
fi
decision=$(python3 - "$out/lnsilu.json" <<'PY'
import json, sys
try:
    rows = json.load(open(sys.argv[1]))["rows"]
except (OSError, ValueError, KeyError) as e:
    print(f"none no microbenchmark result ({type(e).__name__})")
    sys.exit(0)
critic = [r for r in rows if r["shape"].startswith("[2, ") and not r["fold"] and r["ok"] and r["us_total"] is not None]
shapes = sorted({r["shape"] for r in critic})
total = {}
for r in critic:
    total.setdefault(r["variant"], {})[r["shape"]] = r["us_total"]
whole = {v: sum(t.values()) for v, t in total.items() if len(t) == len(shapes)}  # timed at every critic shape
v2 = {v: s for v, s in whole.items() if v.startswith("v2")}
if "compile" not in whole or not v2:
    print(f"none no complete comparison (timed at every critic shape: {sorted(whole)})")
    sys.exit(0)
best = min(v2, key=v2.get)
ratio = v2[best] / whole["compile"]
print(f"{best if ratio < 1.0 else 'none'} best v2 {best}: {v2[best]:.1f} us against compile {whole['compile']:.1f} us "
      f"over {len(shapes)} critic shapes, ratio {ratio:.3f}")
PY
)
config=${decision%% *}
echo "decision: ${decision#* }" | tee -a "$log"
spec=$config; [ "$spec" = none ] && spec=v2
if [ "${DRY:-0}" = 1 ]; then
  echo "would run: DUORL_LNSILU_BWD=$spec pytest -m cuda tests/gpu/test_fused_norm.py"
  [ "$config" != none ] && echo "would run: DUORL_LNSILU_BWD=$config learner_round6_h200.sh $out/round7 (sac_sym sac_nosym: before, fused, fused_bias)"
  exit 0
fi
left=$(( budget - SECONDS ))
echo "+ kernel tests with DUORL_LNSILU_BWD=$spec (limit $(( left < 150 ? left - 10 : 140 )) s)" | tee -a "$log"
DUORL_LNSILU_BWD=$spec timeout $(( left < 150 ? left - 10 : 140 )) python3 -m pytest -m cuda -q -p no:cacheprovider \
  tests/gpu/test_fused_norm.py >> "$log" 2>&1
echo "kernel tests rc=$? at ${SECONDS} s" | tee -a "$log"
left=$(( budget - SECONDS ))
if [ "$config" != none ] && [ $left -gt 150 ]; then
  P=algo.algo_params
  echo "+ learner with DUORL_LNSILU_BWD=$config, budget $(( left - 10 )) s" | tee -a "$log"
  DUORL_LNSILU_BWD=$config BUDGET_S=$(( left - 10 )) CASES="sac_sym sac_nosym" RESERVE_S=100 \
    SAC_ARMS_ONLY="before: fused:$P.layer_norm_silu=fused fused_bias:$P.layer_norm_silu=fused_bias" \
    bash benchmarks/scripts/learner_round6_h200.sh "$out/round7" >> "$log" 2>&1
  echo "learner rc=$? at ${SECONDS} s" | tee -a "$log"
else
  echo "no learner run (config $config, $left s left)" | tee -a "$log"
fi
echo "total ${SECONDS} s of $budget" | tee -a "$log"
