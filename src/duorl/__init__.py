"""duorl: off-policy RL on thousands of MuJoCo Warp environments, one learner/collector duo per GPU."""

import os as _os
import sys as _sys

__version__ = "0.1.0"


def _is_train_command() -> bool:
    """This process is `duorl train`/`resume` (`python -m duorl` or the `duorl` script), being started."""
    argv, orig = _sys.argv, getattr(_sys, "orig_argv", [])
    command = any(orig[i:i + 2] == ["-m", "duorl"] for i in range(len(orig))) and argv[:1] == ["-m"] or (
        _os.path.basename(argv[0]) == "duorl" if argv else False)
    return command and argv[1:2] in (["train"], ["resume"])


# `duorl train`: a stop in the runpy lines between this import and duorl/__main__.py's first instruction is
# recorded (not a KeyboardInterrupt traceback), and __main__.run hands it to the stop request
command_early_signals: list[int] | None = None
if _is_train_command() and "DUORL_PARENT_PID" not in _os.environ and "TORCHELASTIC_RUN_ID" not in _os.environ:
    import _signal

    command_early_signals = []
    for _sig in (_signal.SIGINT, _signal.SIGTERM):
        _signal.signal(_sig, lambda signum, frame: command_early_signals.append(signum))  # type: ignore[union-attr]

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
