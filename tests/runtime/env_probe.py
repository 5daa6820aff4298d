"""Imported ahead by a prestarted collector in tests/runtime/test_prestarted_collector.py: writes what it
sees of its environment to $DUORL_TEST_PROBE, as JSON."""

from __future__ import annotations

import json
import os
import sys

KEYS = ("DUORL_TEST_SET", "DUORL_TEST_GONE", "DUORL_TEST_KEPT")


def record() -> None:
    seen = {k: os.environ.get(k) for k in KEYS}
    seen["torch_imported_before"] = "torch" in sys.modules
    seen["dynamo_imported_before"] = "torch._dynamo" in sys.modules
    with open(os.environ["DUORL_TEST_PROBE"], "w", encoding="utf-8") as f:
        json.dump(seen, f)
