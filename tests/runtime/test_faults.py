"""The fault matrix (tests/runtime/faults.py) with real processes. `make test` runs a representative
subset; the whole matrix runs with DUORL_FAULT_MATRIX=1 (benchmarks/scripts/fault_matrix.sh, also on a GPU)."""

from __future__ import annotations

import os

import pytest

from tests.runtime.faults import ALL_CASES, FaultCase, check_outcome, run_case

# the acceptance case (a stopped collector is named within the stall bound), its mirror (a frozen
# learner is noticed by its collector), a kill in a held checkpoint phase, a clean stop before training,
# and a stop that abandons the learner's compile (the H200 matrix found a compile outlasting the 30 s)
DEFAULT = {
    FaultCase("collector", "SIGSTOP", "steady state"),
    FaultCase("learner", "SIGSTOP", "steady state"),
    FaultCase("collector", "SIGKILL", "writing a checkpoint"),
    FaultCase("learner", "SIGTERM", "building env"),
    FaultCase("learner", "SIGTERM", "compiling or capturing"),
}
FULL = os.environ.get("DUORL_FAULT_MATRIX") == "1"


@pytest.mark.slow
@pytest.mark.parametrize("case", ALL_CASES, ids=[c.id for c in ALL_CASES])
def test_fault(case: FaultCase, tmp_path) -> None:
    if case not in DEFAULT and not FULL:
        pytest.skip("the full fault matrix: DUORL_FAULT_MATRIX=1 (benchmarks/scripts/fault_matrix.sh)")
    check_outcome(case, run_case(case, tmp_path))
