"""`python -m duorl` and the `duorl` script."""

import sys


def run() -> None:
    from duorl.runtime.whole_lines import whole_lines

    whole_lines()  # this process's lines and its collector's (its ranks') share one stderr: each written whole
    from duorl.runtime.stop_signals import STOP_REQUEST

    # a Ctrl-C in the first second of `duorl train` (its imports) is a stop request, not a traceback;
    # a rank listens already (duorl/__init__.py), with its own rule for a second SIGINT
    if sys.argv[1:2] in (["train"], ["resume"]) and not STOP_REQUEST.listening:
        STOP_REQUEST.listen_for_good(escalate=True)
    from duorl.cli.main import console_main

    console_main()


if __name__ == "__main__":
    run()
