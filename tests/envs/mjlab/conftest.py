"""The mjlab tests need the mjlab extra (`make test` installs it with the test extra); without it they
skip, saying so."""

import importlib.util

import pytest

MJLAB_MISSING = importlib.util.find_spec("mjlab") is None


def pytest_collection_modifyitems(config, items):
    if not MJLAB_MISSING:
        return
    skip = pytest.mark.skip(reason="mjlab is not installed: pip install 'duorl[mjlab]' (make test installs it)")
    for item in items:
        if "envs/mjlab/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(skip)
