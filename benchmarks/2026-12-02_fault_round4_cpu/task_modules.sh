#!/bin/bash
# task modules that exit at import, a factory that ignores task.max_episode_steps, a slow factory (7 s)
source "$(dirname "$0")/lib.sh"
run exits_at_import train --task tests.envs.exits_at_import:make --sim mujoco $T training.log_dir=/tmp/bi_run
run os_exits_at_import train --task tests.envs.os_exits_at_import:make --sim mujoco $T training.log_dir=/tmp/bi_run
run parses_argv train --task tests.envs.parses_argv_at_import:make --sim mujoco $T training.log_dir=/tmp/bi_run
run ignores_max_steps train --task tests.envs.bad_tasks:ignores_max_episode_steps --sim mujoco $T training.log_dir=/tmp/bi_run task.max_episode_steps=50
DUORL_TEST_SLOW_S=7 run slow_7s train --task tests.envs.bad_tasks:slow --sim mujoco $T training.log_dir=/tmp/bi_run
grep -c "waiting for task factory" /tmp/bi_err
