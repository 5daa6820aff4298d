"""A task module that fails to import (tests/envs/test_task_sources.py, tests/test_bad_input.py)."""

raise RuntimeError("broken on purpose")
