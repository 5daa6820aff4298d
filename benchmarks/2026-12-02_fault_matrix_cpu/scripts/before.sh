#!/bin/bash
# the cases on the tree given as $1 (src path); output to $2
export PYTHONPATH=$1 OMP_NUM_THREADS=1
P=/work/main/.venv/bin/python; T=/tmp/faults/tools
out=$2; : > $out
run() { echo "== $*" >> $out; timeout 400 "$@" 2>&1 | grep -E "RESULT|^delay|gone|every rank|stopped|error" | tail -4 >> $out; }
run $P $T/measure_sig.py /tmp/faults/b_$3_1 SIGKILL top 'training.devices=[cpu,cpu]'
run $P $T/early_kill.py 1 /tmp/faults/b_$3_2
run $P $T/measure_sig.py /tmp/faults/b_$3_3 SIGINT top 'training.devices=[cpu,cpu]'
run $P $T/measure_sig.py /tmp/faults/b_$3_4 SIGTERM top 'training.devices=[cpu,cpu]'
run $P $T/measure_sig.py /tmp/faults/b_$3_5 SIGKILL rank0 'training.devices=[cpu,cpu]'
run $P $T/measure_sig.py /tmp/faults/b_$3_6 SIGKILL learner
run $P $T/measure_sig.py /tmp/faults/b_$3_7 SIGINT learner
