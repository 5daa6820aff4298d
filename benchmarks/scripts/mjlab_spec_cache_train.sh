#!/bin/bash
# Issue #42 on the CPU: a tiny `duorl train` of mjlab's G1 velocity task whose learner says at exit whether
# it imported mjlab (its startup.json has the phases of both processes).
# usage: benchmarks/scripts/mjlab_spec_cache_train.sh SRC CACHE RUN_DIR   (SRC: the tree's src/ to measure)
DUORL_CACHE_DIR=$2 PYTHONPATH=$1 "${PYTHON:-.venv/bin/python}" -c "
import sys, atexit
atexit.register(lambda: print('LEARNER mjlab imported:', 'mjlab' in sys.modules, file=sys.stderr))
from duorl.cli.main import main
sys.exit(main(sys.argv[1:]))" train --task mjlab:Mjlab-Velocity-Flat-Unitree-G1 --algo sac --sim mjwarp training.devices=[cpu] training.num_envs=8 algo.batch_size=64 algo.buffer_size=64 'algo.actor_hidden_dims=[32]' 'algo.critic_hidden_dims=[32]' algo.max_iterations=20 training.log_interval=5 training.progress=false training.log_dir=$3
echo rc=$?
