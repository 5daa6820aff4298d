"""`duorl tasks` with mjlab: every row a status, exit 0 on a normal install, library noise kept off the
console, the rows cached per mjlab version (a warm listing under 5 s), a package of one's own listed
under `mjlab:` and a package whose registration is broken named (exit 1). The packages are made
importable by path: the package folder and a dist-info naming its `mjlab.tasks` entry point on PYTHONPATH."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from duorl.envs.mjlab import listing
from duorl.envs.mjlab.listing import MjlabRow
from tests.envs.fake_tasks import fake_distribution
from tests.envs.mjlab.packages import EXAMPLE_DIST, ROOT, example_pythonpath

def _env(pythonpath: str, cache: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": pythonpath, "DUORL_CACHE_DIR": str(cache)}


def _tasks(env: dict[str, str], *flags: str) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "duorl", "tasks", *flags], capture_output=True, text=True, env=env,
                       timeout=300)
    return r, time.perf_counter() - t0


@pytest.mark.slow
def test_every_row_has_a_status_and_a_warm_listing_is_fast(tmp_path):
    env = _env(example_pythonpath(tmp_path / "site"), tmp_path / "cache")
    cold, cold_s = _tasks(env)
    assert cold.returncode == 0, cold.stderr
    assert cold.stderr == "", cold.stderr  # no Warp CUDA line, no MULTICCD warning, no notes
    rows = {line.split()[0]: line for line in cold.stdout.splitlines()[1:]}
    assert rows["mjlab:Mjlab-Cartpole-Swingup"].split()[1:4] == ["5", "5", "1"]
    assert rows["mjlab:Mjlab-Cartpole-Swingup"].split()[-2:] == ["mjlab", "trainable"]
    for camera in ("Mjlab-Lift-Cube-Yam-Rgb", "Mjlab-Lift-Cube-Yam-Depth", "Mjlab-Multi-Cube-Seg-Yam"):
        assert rows[f"mjlab:{camera}"].endswith("camera observations")
    for tracking in ("Mjlab-Tracking-Flat-Unitree-G1", "Mjlab-Tracking-Flat-Unitree-G1-No-State-Estimation"):
        assert rows[f"mjlab:{tracking}"].endswith("needs task.motion_file")
    own = rows["mjlab:Duorl-Example-Pendulum"]
    assert own.split()[1:4] == ["3", "3", "1"] and f"mjlab entry point {EXAMPLE_DIST}" in own and own.endswith("trainable")
    # one listing of this mjlab version, and the registry's ids beside it (the learner's id check reads them)
    names = sorted(p.name for p in (tmp_path / "cache" / "tasks").glob("mjlab-*.json"))
    assert len(names) == 2 and names[0].endswith("-ids.json") and names[1] == names[0].replace("-ids", ""), names
    warm, warm_s = _tasks(env)
    assert warm.returncode == 0 and warm.stdout == cold.stdout and warm.stderr == ""
    assert warm_s < 5.0, (cold_s, warm_s)
    as_json, _ = _tasks(env, "--json")
    tasks = {t["name"]: t for t in json.loads(as_json.stdout)["tasks"]}
    assert all(t["status"] for t in tasks.values())
    assert tasks["mjlab:Mjlab-Lift-Cube-Yam-Rgb"]["status"] == "camera observations"
    assert tasks["mjlab:Mjlab-Tracking-Flat-Unitree-G1"]["status"] == "needs task.motion_file"
    assert tasks["mjlab:Duorl-Example-Pendulum"]["source"] == f"mjlab entry point {EXAMPLE_DIST}"


@pytest.mark.slow
def test_a_broken_mjlab_package_is_named_and_the_listing_exits_1(tmp_path):
    """mjlab itself prints a failed package's traceback and goes on; duorl names it in its row and on stderr.
    (Each task's spec is stood in: this is about the registration.)"""
    site = tmp_path / "site"
    fake_distribution(site, "brokenmjlab", {"broken_pkg": "no_such_mjlab_pkg_xyz"}, group="mjlab.tasks")
    script = ("import sys; from duorl.envs.mjlab import listing; from duorl.cli.main import main\n"
              "listing._row = lambda task_id, source: listing.MjlabRow('mjlab:' + task_id, source, 'trainable', 1, 1, 1)\n"
              "sys.exit(main(['tasks']))")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                       env=_env(os.pathsep.join([str(ROOT / "src"), str(site)]), tmp_path / "cache"))
    assert r.returncode == 1, r.stderr
    row = next(line for line in r.stdout.splitlines() if line.startswith("mjlab:broken_pkg"))
    assert "mjlab entry point brokenmjlab" in row and "ModuleNotFoundError" in row and "no_such_mjlab_pkg_xyz" in row
    assert r.stderr == "error: 1 registration(s) cannot be loaded: mjlab:broken_pkg (mjlab entry point brokenmjlab)\n"
    assert "mjlab:Mjlab-Cartpole-Swingup" in r.stdout  # mjlab's own tasks are still listed


def test_the_cache_is_kept_per_version_and_rebuilt_when_asked_or_stale(tmp_path, monkeypatch):
    monkeypatch.setenv("DUORL_CACHE_DIR", str(tmp_path))
    built: list[int] = []
    rows = [MjlabRow("mjlab:A", "mjlab", "trainable", 1, 2, 3), MjlabRow("mjlab:B", "mjlab", "camera observations")]
    monkeypatch.setattr(listing, "build_rows", lambda: built.append(1) or list(rows))
    fp = {"format": 1, "mjlab": "9.9", "duorl": "x", "packages": []}
    monkeypatch.setattr(listing, "fingerprint", lambda: dict(fp))
    assert listing.mjlab_rows() == (rows, "built") and len(built) == 1
    assert listing.mjlab_rows() == (rows, f"cache {tmp_path / 'tasks' / 'mjlab-9.9.json'}") and len(built) == 1
    assert listing.mjlab_rows(refresh=True)[1] == "built" and len(built) == 2
    fp["packages"] = [["mine", "my_pkg", "my-dist", "1.0", None, None]]  # a package added: stale
    assert listing.mjlab_rows()[1] == "built" and len(built) == 3
    (tmp_path / "tasks" / "mjlab-9.9.json").write_text("{not json")
    assert listing.mjlab_rows()[1] == "built" and len(built) == 4


def test_quiet_libraries_drops_the_noise_and_keeps_the_rest(capfd):
    import ctypes
    import warnings

    from duorl.envs.mjlab.quiet import quiet_libraries

    libc = ctypes.CDLL(None)
    with quiet_libraries():
        for line in (b"Warp CUDA warning: Could not find or load the NVIDIA CUDA driver. GPU execution will not be available.\n",
                     b"something else\n"):
            libc.write(2, line, len(line))  # as Warp's native library writes it: past Python's sys.stderr
        warnings.warn("MULTICCD is enabled, but the scene contains CCD pairs", UserWarning)
    err = capfd.readouterr().err
    assert err == "something else\n", err
