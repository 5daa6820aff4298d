#!/bin/bash
# usage: run.sh TAG ALGO SEED [overrides...]
tag=$1 algo=$2 seed=$3; shift 3
d=/tmp/pr/${tag}_${algo}_$seed; rm -rf $d
cd /work/wt-pendulum
OMP_NUM_THREADS=1 PYTHONPATH=/work/wt-pendulum/src /usr/bin/time -f "%e s wall" /work/main/.venv/bin/python -m duorl train --algo $algo --task pendulum_swingup --sim mujoco training.log_dir=$d training.progress=false algo.max_iterations=1001 algo.lr_decay_updates=8800 training.seed=$seed "$@" > $d.log 2>&1
python3 - $d "$(tail -1 $d.log)" <<'PY' >> /tmp/pr/results.txt
import json,sys
d=sys.argv[1]
try:
    rows=[json.loads(l) for l in open(d+"/metrics.jsonl")]
    rets=[r["Train/mean_episode_return"] for r in rows if r["iteration"] in (210,410,610,810,1001) and r.get("Train/mean_episode_return") is not None]
    print(d.split('/')[-1], "final %.1f"%rows[-1]["Train/mean_episode_return"], "curve", " ".join("%.1f"%x for x in rets), "q %.3f scale %.2f"%(rows[-1]["Policy/q_mean"],rows[-1]["Policy/reward_scale"]), sys.argv[2])
except Exception as e:
    print(d, "FAILED", e)
PY
tail -1 /tmp/pr/results.txt
