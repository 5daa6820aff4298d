"""`python -m duorl` and the `duorl` script."""

import sys


def run() -> None:
    # a rank listens already (duorl/__init__.py, with its own rule for a second SIGINT)
    request = getattr(sys.modules.get("duorl.runtime.stop_signals"), "STOP_REQUEST", None)
    listen = sys.argv[1:2] in (["train"], ["resume"]) and not (request is not None and request.listening)
    import duorl

    early: list[int] = duorl.command_early_signals if duorl.command_early_signals is not None else []
    if listen and duorl.command_early_signals is None:
        # a Ctrl-C in the first second of `duorl train` (its imports) is a stop request, not a traceback.
        # Recorded from duorl's first line (duorl/__init__.py) or this one by the C module (loaded at once),
        # before importing stop_signals, whose own imports (signal, enum) took 10-30 ms on a loaded 2-core
        # box: a SIGINT 0.02-0.05 s after the start landed there as a KeyboardInterrupt traceback
        # (test_faults' stop at any moment)
        import _signal

        for s in (_signal.SIGINT, _signal.SIGTERM):
            _signal.signal(s, lambda signum, frame: early.append(signum))
    from duorl.runtime.whole_lines import whole_lines

    whole_lines()  # this process's lines and its collector's (its ranks') share one stderr: each written whole
    if listen:
        from duorl.runtime.stop_signals import STOP_REQUEST

        STOP_REQUEST.listen_for_good(escalate=True)  # replaces the recorder
        for signum in early:  # what came before the handler existed, handled now, in order
            if STOP_REQUEST.stops_at_once(signum):  # a second Ctrl-C: nothing was started or written yet
                from duorl.cli.early_stop import say_stopped

                sys.exit(say_stopped())
            STOP_REQUEST.handle(signum, None)
    from duorl.cli.main import console_main

    console_main()


if __name__ == "__main__":
    run()
