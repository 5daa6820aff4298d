"""A task module that parses the command line at import (a script turned into a module) and requires an
argument: argparse exits 2 while duorl imports it (issue #39). duorl hands an importing module an argv of
its own name only, so a module whose arguments all have defaults imports."""

import argparse

parser = argparse.ArgumentParser()
parser.add_argument("--robot", required=True)
ARGS = parser.parse_args()


def make(cfg):  # type: ignore[no-untyped-def]
    raise AssertionError("never reached")
