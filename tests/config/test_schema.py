"""Every setting's facts live in its schema declaration (config/schema.py `setting(...)`), complete enough
for validation, `duorl config --keys`, docs/configuration.md and resume to read them from there."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

import pytest

from duorl.config.keys import describe, leaves, may_differ_on_resume
from duorl.config.schema import MAY_DIFFER, MUST_MATCH, Config, Setting, setting_of


def _base(tp: Any) -> Any:
    """The type without its Optional."""
    args = typing.get_args(tp)
    if typing.get_origin(tp) is typing.Union and type(None) in args:
        return next(a for a in args if a is not type(None))
    return tp


def _missing(key: str, tp: Any, s: Setting | None) -> str | None:
    """What `key`'s declaration lacks for its type, or None."""
    if s is None:
        return "no setting(...) declaration"
    if not s.help or "\n" in s.help:
        return "no one-line help"
    if s.resume not in (MAY_DIFFER, MUST_MATCH):
        return f"resume={s.resume!r} (expected {MAY_DIFFER!r} or {MUST_MATCH!r})"
    base = _base(tp)
    if s.free_form and not s.allowed:
        return "free_form without an `allowed` text saying what it takes and where it is checked"
    if base in (int, float) and not (s.bounded or s.free_form):
        return "a number without bounds (min/max/above/below), nor free_form with its rule in `allowed`"
    if base is str and not (s.choices or s.free_form):
        return "a text without choices, nor free_form (a path, a name) with `allowed`"
    if typing.get_origin(base) is list and typing.get_args(base) == (int,) and not s.bounded:
        return "a list of ints without bounds on its elements"
    if typing.get_origin(base) is list and typing.get_args(base) != (int,) and not s.allowed:
        return "a list without an `allowed` text (what its entries may be)"
    if s.choices and base is not str:
        return "choices on a key that is not a text"
    return None


def test_every_setting_declares_what_its_type_needs() -> None:
    problems = [f"{key}: {why}" for key, (tp, f) in leaves().items() if (why := _missing(key, tp, setting_of(f)))]
    assert not problems, "config/schema.py:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize(("tp", "s", "lacks"), [
    (int, Setting("n"), "without bounds"),
    (typing.Optional[float], Setting("x"), "without bounds"),
    (typing.Optional[str], Setting("t"), "without choices"),
    (str, Setting("p", free_form=True), "without an `allowed` text"),
    (list[int], Setting("widths"), "without bounds on its elements"),
    (typing.Optional[list[Any]], Setting("devices"), "without an `allowed` text"),
    (int, Setting("", min=0), "help"),
    (bool, Setting("b", resume="sometimes"), "resume="),
    (int, None, "no setting(...)"),
])
def test_the_walk_names_what_a_declaration_lacks(tp: Any, s: Setting | None, lacks: str) -> None:
    assert lacks in (_missing("k", tp, s) or "")


@pytest.mark.parametrize(("tp", "s"), [
    (int, Setting("n", min=0)), (float, Setting("x", above=0, max=1)), (bool, Setting("b")),
    (typing.Optional[str], Setting("t", choices=("a",))), (str, Setting("p", free_form=True, allowed="a path")),
    (float, Setting("x", free_form=True, allowed="finite, < algo.v_max")),
])
def test_the_walk_accepts_a_complete_declaration(tp: Any, s: Setting) -> None:
    assert _missing("k", tp, s) is None


def test_every_default_keeps_its_own_bounds_and_choices() -> None:
    """A default the key's own rule refuses would make the schema contradict itself."""
    from duorl.config.validate import _check_setting  # noqa: PLC2701 - the per-key check itself

    for key, (tp, f) in leaves().items():
        s = setting_of(f)
        assert s is not None
        _check_setting(Config(), key, tp, s)


@pytest.mark.parametrize(("key", "outside"), [
    ("algo.batch_size", 0), ("algo.gamma", 1.0), ("algo.tau", 1.5), ("training.seed", 2**32),
])
def test_the_validator_reads_the_bounds_from_the_schema(key: str, outside: float) -> None:
    """The validator keeps no table of its own: the same value passes once the Setting has no bounds."""
    from duorl.config.errors import ConfigError
    from duorl.config.validate import _check_setting  # noqa: PLC2701

    tp, f = leaves()[key]
    s = setting_of(f)
    assert s is not None and s.bounded
    cfg = Config()
    section, name = key.split(".")
    setattr(getattr(cfg, section), name, outside)
    with pytest.raises(ConfigError) as info:
        _check_setting(cfg, key, tp, s)
    assert info.value.key == key
    _check_setting(cfg, key, tp, dataclasses.replace(s, min=None, max=None, above=None, below=None))


def test_resume_reads_the_schema() -> None:
    may = may_differ_on_resume()
    assert {"training.log_dir", "algo.max_iterations", "debug.slow_phase", "training.wandb_mode"} <= may
    assert not {"algo.batch_size", "training.num_envs", "task.name", "training.nan_guard.enabled"} & may
    assert may == {k for k, i in describe().items() if i.setting and i.setting.resume == MAY_DIFFER}
