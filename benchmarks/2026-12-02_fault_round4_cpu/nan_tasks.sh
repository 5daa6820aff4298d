#!/bin/bash
# issue #39's NaN tasks (tests/envs/bad_tasks.py) run 100 iterations each: bash nan_tasks.sh [NAME...]
# prints lib.sh's line, then the summary's status, the last row's Train/nan_resets and
# Train/skipped_updates, and how many stderr lines MuJoCo's warnings took
source "$(dirname "$0")/lib.sh"
for t in "${@:-nan_obs nan_reward_late nan_obs_late nan_reward_once}"; do
  for name in $t; do
    CUT=${CUT:-400} run "$name" train --task tests.envs.bad_tasks:$name --sim mujoco $T algo.max_iterations=100 \
      training.log_interval=10 training.log_dir=/tmp/bi_run
    .venv/bin/python - <<'PY'
import json, pathlib
run = pathlib.Path("/tmp/bi_run")
s = json.loads((run / "run_summary.json").read_text()) if (run / "run_summary.json").exists() else {}
rows = [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines()] if (run / "metrics.jsonl").exists() else []
last = rows[-1] if rows else {}
warn = sum("WARNING: Nan" in l for l in open("/tmp/bi_err"))
print(f"    status={s.get('status')} failed_part={s.get('failed_part')} rows={len(rows)} "
      f"nan_resets={last.get('Train/nan_resets')} skipped_updates={last.get('Train/skipped_updates')} "
      f"mujoco_warnings={warn}")
PY
  done
done
