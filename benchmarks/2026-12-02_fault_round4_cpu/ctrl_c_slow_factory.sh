cd /work/wt/badinput; source benchmarks/2026-12-02_fault_round4_cpu/lib.sh
rm -rf /tmp/bi_run
s=$(date +%s.%N)
DUORL_TEST_SLOW_S=60 PYTHONPATH=$PWD/src:$PWD .venv/bin/python -m duorl train --task tests.envs.bad_tasks:slow --sim mujoco $T training.log_dir=/tmp/bi_run >/tmp/bi_out 2>/tmp/bi_err &
pid=$!
sleep ${AT:-8}; kill -INT $pid; k=$(date +%s.%N); wait $pid; rc=$?; e=$(date +%s.%N)
printf 'slow factory, SIGINT at %s s: exit %s, %.1f s after the signal, run dir %s\n' "${AT:-8}" $rc "$(echo "$e - $k"|bc)" "$( [ -e /tmp/bi_run ] && echo yes || echo no)"
cat /tmp/bi_err
