"""duorl: off-policy RL on thousands of MuJoCo Warp environments, one learner/collector duo per GPU."""

import os as _os

__version__ = "0.1.0"

# a duorl process started by another one (a rank, a collector) dies with it: armed here, at the first
# import, before anything slow (runtime/orphans.py)
if "DUORL_PARENT_PID" in _os.environ or "TORCHELASTIC_RUN_ID" in _os.environ:
    import _signal  # the C module, loaded at once: a stop in these first milliseconds is recorded (not a
    # KeyboardInterrupt traceback from the middle of an import) and handed to the real handlers below

    early_signals: list[int] = []
    _before = {_sig: _signal.signal(_sig, lambda signum, frame: early_signals.append(signum))
               for _sig in (_signal.SIGINT, _signal.SIGTERM)}
    # a launcher starts its ranks with both blocked (runtime/orphans.stop_signals_held_for_children): one
    # that came during the interpreter's start was held, and reaches the recorder now
    _signal.pthread_sigmask(_signal.SIG_UNBLOCK, {_signal.SIGINT, _signal.SIGTERM})

    from duorl.runtime.orphans import arm_from_environment as _arm

    _arm(early_signals, _before)
