#!/usr/bin/env bash
# How often tests/distributed/test_grad_sync.py::test_bf16_wire_math_against_a_plain_reference fails in N runs of a
# tree (its src/ and tests/ on PYTHONPATH, run from that tree's root). Usage: wire_flake_count.sh TREE N
tree=${1:?TREE}; n=${2:?N}; f=0
for i in $(seq 1 "$n"); do
  (cd "$tree" && PYTHONPATH="$tree/src:$tree" timeout 120 python -m pytest -q -p no:cacheprovider \
    "tests/distributed/test_grad_sync.py::test_bf16_wire_math_against_a_plain_reference" > /tmp/wire_flake.log 2>&1) \
    || { f=$((f+1)); grep -m1 "terminated with signal" /tmp/wire_flake.log; }
done
echo "$tree: $f failed of $n"
