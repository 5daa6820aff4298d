"""`duorl tasks`: every row has a status; a registered task that cannot be loaded gets its row and the reason,
and exit code 1 naming it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from duorl.cli.main import main
from tests.envs.fake_tasks import fake_distribution, hide_mjlab


def test_a_broken_entry_point_is_listed_with_its_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    fake_distribution(tmp_path, "brokendist", {"broken_task": "no_such_module_xyz:make",
                                               "good_task": "tests.envs.fake_tasks:pendulum"})
    monkeypatch.syspath_prepend(str(tmp_path))
    hide_mjlab(monkeypatch)
    assert main(["tasks"]) == 1
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].split() == ["task", "actor", "obs", "critic", "obs", "action", "mirror", "source", "status"]
    rows = {line.split()[0]: line for line in lines[1:-1]}
    assert "entry point brokendist  cannot be loaded:" in rows["broken_task"] and "fails to import" in rows["broken_task"]
    assert rows["good_task"].split()[1:] == ["3", "3", "1", "no", "entry", "point", "brokendist", "trainable"]
    assert err == "error: 1 registration(s) cannot be loaded: broken_task (entry point brokendist)\n"
    assert main(["tasks", "--json"]) == 1
    tasks = {t["name"]: t for t in json.loads(capsys.readouterr().out)["tasks"]}
    assert tasks["good_task"]["status"] == "trainable" and tasks["broken_task"]["status"].startswith("cannot be loaded")
