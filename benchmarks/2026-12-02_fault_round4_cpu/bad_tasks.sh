#!/bin/bash
# each broken task of tests/envs/bad_tasks.py given as --task: bash bad_tasks.sh NAME...
source "$(dirname "$0")/lib.sh"
for t in "$@"; do run "$t" train --task tests.envs.bad_tasks:$t --sim mujoco $T training.log_dir=/tmp/bi_run; done
