"""duorl: off-policy RL on thousands of MuJoCo Warp environments, one learner/collector duo per GPU."""

import os as _os

__version__ = "0.1.0"

# a duorl process started by another one (a rank, a collector) dies with it: armed here, at the first
# import, before anything slow (runtime/orphans.py)
if "DUORL_PARENT_PID" in _os.environ or "TORCHELASTIC_RUN_ID" in _os.environ:
    from duorl.runtime.orphans import arm_from_environment as _arm

    _arm()
