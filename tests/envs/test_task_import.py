"""envs/task_import.py: a task module's import cannot end duorl, and a slow factory is named while it runs
(issue #39). The refusals end to end: tests/test_bad_input.py; Ctrl-C during a slow factory:
tests/cli/test_early_stop.py."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest

from duorl.envs import task_import
from duorl.envs.task_import import ExitAtImport, call_waiting, import_task_module


@pytest.mark.parametrize("module,how", [("tests.envs.exits_at_import", "sys.exit(3)"),
                                        ("tests.envs.os_exits_at_import", "os._exit(0)"),
                                        ("tests.envs.parses_argv_at_import", "sys.exit(2)")])
def test_an_exit_at_import_is_refused_and_leaves_the_process_as_it_was(module: str, how: str,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    argv, exit_ = list(sys.argv), os._exit
    with pytest.raises(ExitAtImport) as e:
        import_task_module(module)
    assert e.value.how == how
    assert sys.argv == argv and os._exit is exit_ and module not in sys.modules
    if "argv" in module:  # what argparse wrote is quoted, not printed
        assert "required: --robot" in e.value.said
    assert capsys.readouterr().err == ""


def test_another_threads_os_exit_is_not_intercepted(monkeypatch: pytest.MonkeyPatch) -> None:
    """A watchdog thread's os._exit while a module imports must still end the process."""
    seen: list[int] = []
    monkeypatch.setattr(os, "_exit", lambda code: seen.append(code))
    with task_import._exits_refused("m"):
        t = threading.Thread(target=lambda: os._exit(7))
        t.start()
        t.join()
    assert seen == [7]


def test_a_good_import_writes_what_it_held_back(tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "chatty_task_mod.py").write_text("import sys\nprint('hello from the task', file=sys.stderr)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert import_task_module("chatty_task_mod").__name__ == "chatty_task_mod"
    assert "hello from the task" in capsys.readouterr().err


def test_a_slow_call_is_named_while_it_runs(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(task_import, "WAIT_REPORT_S", 0.1)
    monkeypatch.setattr(task_import, "WAIT_REPEAT_S", 0.2)
    assert call_waiting(lambda x: (time.sleep(0.45), x)[1], 5, what="task factory pkg.mod:make") == 5
    err = capsys.readouterr().err
    assert err.startswith("duorl: waiting for task factory pkg.mod:make (0 s)") and err.count("\n") >= 2, err
    assert call_waiting(lambda: 1, what="x") == 1 and capsys.readouterr().err == ""  # a quick one says nothing
