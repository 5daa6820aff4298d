#!/usr/bin/env bash
# Issue #41, round 6 (benchmarks/2026-12-02_learner_round6_h200/NOTES.md): the learner-speed switches of
# algo.algo_params against every switch at its default ("before"), for the three cases of the issue.
# Each case is one `duorl bench learner --arm ...` process: its arms are built (compiled, captured) in
# turn, then ITERS rounds time one graph replay of every arm, interleaved (ABBA), so that each arm's
# median is a ratio to "before" from the same minutes of the same GPU.
#
# On the GPU machine, from the repo root, after the wheels are staged (../shared/tools/device-wheels.sh):
#   bash benchmarks/scripts/learner_round6_h200.sh "$OUT"
# It stops by itself within BUDGET_S seconds (default 400, cold caches and torch.compile included): each
# case gets what is left less a reserve for the cases after it, and `bench learner --budget-s` skips the
# arms (listed by importance) whose set-up would not fit. Raw JSON per case, the logs and the final
# table land in OUT_DIR (at most 7 files: the device returns 8).
#
# Env: BUDGET_S (400), ITERS (rounds, 30), PROFILE (N: kernel-profile N replays of each arm but
# "before" while time is left; 0), CASES ("sac_sym sac_nosym flashsac"), RESERVE_S (seconds kept per
# later case, 110), SAC_ARMS_ONLY (the sac arms instead of the list below). The logic runs on the CPU
# too: DEVICE=cpu SMALL=1 (tiny networks, eager iterations;
# the Triton arms run their kernels there with TRITON_INTERPRET=1 and Triton on EXTRA_PYTHONPATH).
set -uo pipefail
out=${1:?OUT_DIR}
mkdir -p "$out"
if [ "${DEVICE:-cuda}" = cuda ]; then
  source benchmarks/scripts/device_env.sh
  export PYTHONPATH=/tmp/duorl-site:$PWD/src
  record_device "$out"
  py=python3
else
  export PYTHONPATH=$PWD/src${EXTRA_PYTHONPATH:+:$EXTRA_PYTHONPATH} PYTHONUNBUFFERED=1
  py=${PY:-.venv/bin/python}
fi
budget=${BUDGET_S:-400} iters=${ITERS:-30} profile=${PROFILE:-0} reserve=${RESERVE_S:-110}
cases=(${CASES:-sac_sym sac_nosym flashsac})
P=algo.algo_params
# the arms, most important first (a case stops adding arms when its budget runs out); SAC_ARMS_ONLY
# (space-separated NAME:OVERRIDES entries, "$P" for algo.algo_params) replaces the sac list
SAC_ARMS=(
  "before:"
  "after:$P.layer_norm_silu=fused_bias,$P.gradients_by_copy=true,$P.packed_replay=true"
  "fused:$P.layer_norm_silu=fused"
  "fused_bias:$P.layer_norm_silu=fused_bias"
  "small_kernels:$P.gradients_by_copy=true,$P.packed_replay=true"
)
if [ -n "${SAC_ARMS_ONLY:-}" ]; then
  read -r -a SAC_ARMS <<< "${SAC_ARMS_ONLY//\$P/$P}"
fi
FLASH_ARMS=(
  "before:"
  "after:$P.batchnorm_stats_kernel=true,$P.gradients_by_copy=true,$P.packed_replay=true"
  "bn_stats:$P.batchnorm_stats_kernel=true"
  "small_kernels:$P.gradients_by_copy=true,$P.packed_replay=true"
)
small_sac=() small_flash=() device_args=()
if [ "${SMALL:-0}" = 1 ]; then
  small_sac=(training.num_envs=8 algo.batch_size=32 algo.updates_per_step=4 "algo.actor_hidden_dims=[16]"
             "algo.critic_hidden_dims=[24,16]")
  small_flash=(training.num_envs=8 algo.batch_size=32 algo.actor_hidden_dim=16 algo.critic_hidden_dim=16
               algo.actor_num_blocks=1 algo.critic_num_blocks=1 algo.num_atoms=11)
  device_args=(--replay-ticks 4 --warmup 1)
fi
[ "${DEVICE:-cuda}" = cuda ] || device_args+=(--device "${DEVICE}")

n_cases=${#cases[@]}
for i in "${!cases[@]}"; do
  name=${cases[$i]}
  later=$(( n_cases - i - 1 ))
  left=$(( budget - SECONDS ))
  case_budget=$(( left - later * reserve ))
  if [ "$case_budget" -lt 60 ]; then
    echo "== $name: skipped, ${left} s left of $budget" | tee -a "$out/bench.log"; continue
  fi
  arms=()
  case $name in
    sac_sym) extra=(--algo sac --task g1_walk_flat "${small_sac[@]}"); list=("${SAC_ARMS[@]}");;
    sac_nosym) extra=(--algo sac --task g1_walk_flat algo.use_symmetry=false "${small_sac[@]}"); list=("${SAC_ARMS[@]}");;
    flashsac) extra=(--algo flashsac --task g1_walk_flat "${small_flash[@]}"); list=("${FLASH_ARMS[@]}");;
    *) echo "unknown case $name" >&2; exit 2;;
  esac
  for a in "${list[@]}"; do arms+=(--arm "$a"); done
  # the soft budget starts after the imports (~15 s); the hard limit is a last resort (its JSON is lost)
  soft=$(( case_budget - 20 )) hard=$(( left - later * (reserve - 20) - 5 ))
  echo "== $name: budget ${case_budget} s (soft ${soft}, hard ${hard}), $left s left" | tee -a "$out/bench.log"
  timeout -k 5 "$hard" $py -m duorl bench learner "${extra[@]}" "${device_args[@]}" --iters "$iters" \
    --profile "$profile" --budget-s "$soft" "${arms[@]}" --out "$out/$name.json" > /dev/null 2>> "$out/bench.log"
  echo "rc=$? $name after ${SECONDS} s" | tee -a "$out/bench.log"
done

$py - "$out" "${cases[@]}" <<'PY' | tee "$out/table.txt"
import json, os, sys
out, cases = sys.argv[1], sys.argv[2:]
rows = []
print(f"{'case':10} {'arm':14} {'median ms':>10} {'p90 ms':>8} {'ratio':>7} {'setup s':>8}  overrides")
for case in cases:
    path = os.path.join(out, f"{case}.json")
    try:
        r = json.load(open(path))
    except Exception as e:  # noqa: BLE001 - a missing case is a row of the table, not a crash
        print(f"{case:10} (no result: {type(e).__name__})")
        continue
    for a in r["arms"]:
        ms = a["ms_per_iteration"]
        print(f"{case:10} {a['name']:14} {ms['median']:10.3f} {ms['p90']:8.3f} {a['median_ratio_to_first']:7.3f} "
              f"{a['setup_s']:8.1f}  {','.join(o.split('.')[-1] for o in a['overrides'])}")
    for name in r.get("arms_skipped", []):
        print(f"{case:10} {name:14} {'skipped (budget)':>10}")
    for a in r["arms"]:
        p = a.get("profile")
        if p and "kernels" in p:
            kinds = ", ".join(f"{k} {v['ms_per_iteration']}" for k, v in p["by_kind"].items())
            print(f"  {case}/{a['name']}: {p['kernels_per_iteration']} kernels, busy {p['busy_ms_per_iteration']} ms, "
                  f"idle {p['idle_ms_per_iteration']} ms; ms by kind: {kinds}")
            for k in p["kernels"][:8]:
                print(f"    {k['ms_per_iteration']:7.3f} ms {k['calls_per_iteration']:5.0f}x {k['kind']:13} {k['name'][:90]}")
        elif p:
            print(f"  {case}/{a['name']}: profile failed: {p.get('error')}")
PY
echo "total ${SECONDS} s of ${budget}"
