"""The stall recorder travels to the spawned collector by reference: unpickling it must not pull the
CLI's configuration stack (OmegaConf, config loading, MPS) into the collector's start-up."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

from duorl.cli.learner_stall import stall_recorder

ROOT = Path(__file__).resolve().parents[2]


def test_unpickling_the_recorder_imports_no_cli_configuration(tmp_path: Path) -> None:
    blob = pickle.dumps(stall_recorder(None, tmp_path))
    code = ("import pickle, sys, json; f = pickle.loads(sys.stdin.buffer.read()); "
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('duorl', 'omegaconf')))))")
    r = subprocess.run([sys.executable, "-c", code], input=blob, capture_output=True, timeout=60,
                       env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr[-2000:]
    loaded = json.loads(r.stdout)
    assert "duorl.cli.learner_stall" in loaded
    assert not [m for m in loaded if m.startswith("omegaconf") or m in ("duorl.cli.train", "duorl.config.load")], loaded


def test_the_recorder_marks_the_run_failed_naming_the_learner(tmp_path: Path) -> None:
    from duorl.telemetry.summary import write_json_atomic

    write_json_atomic(tmp_path / "run_summary.json", {"status": "running"})
    stall_recorder(None, tmp_path)("the learner (pid 1) froze")
    summary = json.loads((tmp_path / "run_summary.json").read_text())
    assert summary["status"] == "failed" and "the learner (pid 1) froze" in json.dumps(summary)
