#!/bin/bash
# Issue #31's measured cases on one tree (two CPU ranks over gloo where named, else one process; tiny
# pendulum runs), each a real `duorl train` signalled after 3 logged iterations: the launcher SIGKILLed,
# the learner SIGKILLed 1 s after spawning its collector, SIGINT and SIGTERM to the launcher, rank 0's
# learner SIGKILLed, a single learner SIGKILLed, a single learner SIGINTed. One RESULT line per case:
# exit code, seconds from the signal to the exit and to no process left, survivors, the summary's
# status, part and error, seconds from the last summary write to the exit.
#   bash benchmarks/scripts/fault_issue_cases.sh SRC_DIR OUT.txt TAG   (from the repo root; SRC_DIR: the tree's src)
export PYTHONPATH=$1 OMP_NUM_THREADS=1
S=$(dirname "$0")
out=$2; tmp=${TMPDIR:-/tmp}/duorl-fault-cases-$3; rm -rf "$tmp"; mkdir -p "$tmp"; : > "$out"
run() { echo "== $*" >> "$out"; timeout 400 python3 "$@" 2>&1 | grep -E "RESULT|^delay|gone|every rank|stopped|error" | tail -4 >> "$out"; }
run $S/fault_signal_timing.py $tmp/1 SIGKILL top 'training.devices=[cpu,cpu]'
run $S/fault_early_kill.py 1 $tmp/2
run $S/fault_signal_timing.py $tmp/3 SIGINT top 'training.devices=[cpu,cpu]'
run $S/fault_signal_timing.py $tmp/4 SIGTERM top 'training.devices=[cpu,cpu]'
run $S/fault_signal_timing.py $tmp/5 SIGKILL rank0 'training.devices=[cpu,cpu]'
run $S/fault_signal_timing.py $tmp/6 SIGKILL learner
run $S/fault_signal_timing.py $tmp/7 SIGINT learner
