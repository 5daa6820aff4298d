"""The mjlab spec cache (envs/mjlab/spec_cache.py, issue #42): an EnvSpec round-trips through its file
exactly; a warm cache answers a fresh process's id check and spec without importing mjlab; a changed
fingerprint or a corrupt file falls back to importing it; an unknown id is refused with the closest ids
from the cache; the collector's env refuses a doctored cache naming the fields and the file, and rewrites it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import duorl.envs.mjlab.cache_files as cache_files
from duorl.envs.base import EnvSpec, Mirror, spec_differences, spec_from_dict, spec_to_dict
from duorl.envs.mjlab import spec_cache
from duorl.envs.mjlab.family import MjlabConfig, MjlabTrackingConfig
from tests.envs.mjlab.packages import ROOT

SPEC = EnvSpec("mjlab:Some-Task", 3, 4, 2, 1000, 0.02, ("Episode_Reward/a", "Metrics/b"), None)
MIRRORED = EnvSpec("t", 2, 3, 1, 7, 0.1 + 0.2, ("x",),
                   Mirror(((1, 0), (-1.0, -1.0)), ((0, 2, 1), (1.0, 1.0, 1.0)), ((0,), (-1.0,))))


@pytest.mark.parametrize("spec", [SPEC, MIRRORED])
def test_an_env_spec_round_trips_exactly_through_json(spec):
    back = spec_from_dict(json.loads(json.dumps(spec_to_dict(spec))))
    assert back == spec and back.control_dt == spec.control_dt  # 0.1 + 0.2, not 0.3: the float itself
    assert type(back.metric_names) is tuple and (back.mirror is None) == (spec.mirror is None)


@pytest.mark.parametrize("doctor", [lambda d: d.pop("action_dim"), lambda d: d.update(extra=1),
                                    lambda d: d.update(action_dim="2"), lambda d: d.update(metric_names=[1])])
def test_a_spec_file_of_another_shape_is_refused(doctor):
    data = spec_to_dict(SPEC)
    doctor(data)
    with pytest.raises((ValueError, TypeError)):
        spec_from_dict(data)


def test_spec_differences_names_each_field():
    assert spec_differences(SPEC, SPEC) == []
    other = EnvSpec("mjlab:Some-Task", 3, 5, 2, 999, 0.02, SPEC.metric_names)
    assert spec_differences(SPEC, other) == ["critic_obs_dim: 4 != 5", "max_episode_steps: 1000 != 999"]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DUORL_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_a_stored_spec_is_read_back_under_its_fingerprint_and_keys(cache, monkeypatch):
    cfg = MjlabConfig(name="mjlab:Some-Task")
    assert spec_cache.cached_spec("Some-Task", cfg) is None
    spec_cache.store_spec("Some-Task", cfg, SPEC, ("Episode_Metrics/c",))
    spec, dropped, path = spec_cache.cached_spec("Some-Task", cfg)
    assert (spec, dropped) == (SPEC, ("Episode_Metrics/c",)) and path.is_file() and str(cache) in str(path)
    # another value of a task key is another file
    assert spec_cache.cached_spec("Some-Task", MjlabConfig(name="mjlab:Some-Task", max_episode_steps=10)) is None
    clip = MjlabTrackingConfig(name="mjlab:Some-Task", motion_file="/a.npz")
    spec_cache.store_spec("Some-Task", clip, SPEC, ())
    assert spec_cache.cached_spec("Some-Task", MjlabTrackingConfig(name="mjlab:Some-Task", motion_file="/b.npz")) is None
    assert spec_cache.cached_spec("Some-Task", clip)[0] == SPEC
    # a changed fingerprint (here mjlab's modules edited: another mtime) or a corrupt file: absent
    real = cache_files.fingerprint()
    monkeypatch.setattr(cache_files, "fingerprint", lambda: {**real, "packages": [["x", "y", "z", "1", None, 1.0]]})
    assert spec_cache.cached_spec("Some-Task", cfg) is None
    monkeypatch.setattr(cache_files, "fingerprint", lambda: real)
    assert spec_cache.cached_spec("Some-Task", cfg) is not None
    path.write_text("{not json")
    assert spec_cache.cached_spec("Some-Task", cfg) is None
    path.write_text(json.dumps({"fingerprint": real, "payload": {"key": "?", "spec": {}}}))
    assert spec_cache.cached_spec("Some-Task", cfg) is None


def test_ids_are_cached_and_a_corrupt_file_reads_as_absent(cache):
    assert spec_cache.cached_ids() is None
    spec_cache.store_ids(["A", "B"])
    assert spec_cache.cached_ids() == ["A", "B"]
    spec_cache.ids_path(cache_files.fingerprint()).write_text("[]")
    assert spec_cache.cached_ids() is None


def test_confirm_refuses_a_doctored_cache_naming_the_fields_and_the_file_and_rewrites_it(cache):
    cfg = MjlabConfig(name="mjlab:Some-Task")
    spec_cache.confirm("Some-Task", cfg, SPEC, ())  # no cache: written, nothing to compare
    assert spec_cache.cached_spec("Some-Task", cfg)[0] == SPEC
    spec_cache.confirm("Some-Task", cfg, SPEC, ())  # the same: fine
    doctored = EnvSpec(SPEC.task, 3, 4, 7, 1000, 0.02, SPEC.metric_names)
    spec_cache.store_spec("Some-Task", cfg, doctored, ())
    with pytest.raises(spec_cache.StaleSpecCache) as e:
        spec_cache.confirm("Some-Task", cfg, SPEC, ())
    path = spec_cache.cached_spec("Some-Task", cfg)[2]
    assert "action_dim: 7 != 2" in str(e.value) and str(path) in str(e.value) and "duorl tasks --refresh" in str(e.value)
    assert spec_cache.cached_spec("Some-Task", cfg)[0] == SPEC  # the built env's spec replaced it


# --------------------------------------------------------------------- real mjlab, fresh processes
TASK = "mjlab:Mjlab-Velocity-Flat-Unitree-G1"
PROBE = """
import json, sys
from duorl.cli.configure import load_config
from duorl.config.errors import ConfigError
from duorl.envs.task_sources import source_of
out = {}
try:
    cfg = load_config('sac', sys.argv[1], 'mjwarp', ['training.devices=[cpu]'])
    out['spec'] = source_of(cfg.task.name).spec(cfg.task).record()
except ConfigError as e:
    out['refused'] = str(e)
out['mjlab'] = 'mjlab' in sys.modules
print(json.dumps(out))
"""


def _probe(cache: Path, task: str = TASK) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]), "DUORL_CACHE_DIR": str(cache)}
    r = subprocess.run([sys.executable, "-c", PROBE, task], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_warm_cache_spares_a_fresh_learner_the_mjlab_import_and_a_stale_one_does_not(tmp_path):
    cold = _probe(tmp_path)  # builds the spec once: mjlab imported, the cache written
    assert cold["mjlab"] and cold["spec"]["action_dim"] == 29
    warm = _probe(tmp_path)
    assert warm == {**cold, "mjlab": False}
    # an unknown id: refused with the closest ids, from the cache, still without mjlab
    refused = _probe(tmp_path, "mjlab:Mjlab-Velocity-Flat-Unitree-G2")
    assert not refused["mjlab"] and "unknown mjlab task id" in refused["refused"]
    assert "closest: mjlab:Mjlab-Velocity-Flat-Unitree-G1" in refused["refused"]
    # a corrupt spec file: today's path (mjlab imported, the spec built and written again)
    (spec_file,) = (tmp_path / "tasks").glob("mjlab-*-specs/Mjlab-Velocity-Flat-Unitree-G1-*.json")
    spec_file.write_text("{truncated")
    assert _probe(tmp_path) == cold
    assert _probe(tmp_path)["mjlab"] is False  # written again
    # a fingerprint that no longer matches (as a new duorl or mjlab would make it): today's path
    for path in (spec_file, next((tmp_path / "tasks").glob("mjlab-*-ids.json"))):
        data = json.loads(path.read_text())
        data["fingerprint"]["duorl"] = "0.0.0-other"
        path.write_text(json.dumps(data))
    assert _probe(tmp_path) == cold


@pytest.mark.slow
def test_a_run_whose_learner_read_a_doctored_spec_fails_in_the_collector_before_training(tmp_path, monkeypatch):
    """The learner sizes itself by a cached spec the env does not have (actor_obs_dim 6, cartpole's is 5):
    the collector's env build refuses it (exit 1, failed in the collector, the field and the file named),
    and leaves the built env's spec in the file."""
    from tests.conftest import run_duorl

    monkeypatch.setenv("DUORL_CACHE_DIR", str(tmp_path / "cache"))
    task_id = "Mjlab-Cartpole-Swingup"
    cfg = MjlabConfig(name=f"mjlab:{task_id}", max_episode_steps=10)
    doctored = EnvSpec(f"mjlab:{task_id}", 6, 5, 1, 10, 0.02, ())
    spec_cache.store_spec(task_id, cfg, doctored, ())
    path = spec_cache.cached_spec(task_id, cfg)[2]
    run = tmp_path / "run"
    r = run_duorl(run, "training.devices=[cpu]", "training.num_envs=2", "task.max_episode_steps=10",
                  "algo.max_iterations=2", task=f"mjlab:{task_id}", sim="mjwarp", timeout=400)
    assert r.returncode == 1, r.stderr[-4000:]
    summary = json.loads((run / "run_summary.json").read_text())
    assert summary["status"] == "failed" and summary["iterations"] == 0
    assert summary["failed_part"].startswith("collector"), summary["failed_part"]
    assert "is not the spec of the env built now" in summary["error"] and "actor_obs_dim: 6 != 5" in summary["error"]
    assert "Traceback" not in summary["error"] and "Traceback" not in r.stderr  # the cause in words, one line
    assert str(path) in summary["error"] and "duorl tasks --refresh" in summary["error"]
    fresh = spec_cache.cached_spec(task_id, cfg)[0]
    assert fresh.actor_obs_dim == 5 and fresh != doctored
