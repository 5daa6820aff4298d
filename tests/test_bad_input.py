"""The bad-input matrix (issue #21): every input duorl must refuse is refused before anything is
built, with exit code 2, one line on stderr naming the key or file, the value and the fix, and nothing
left behind (no run directory, no output file).

The cases run in this process through `duorl.cli.main` (a subprocess each would cost minutes): a
refusal happens before any process is spawned, so nothing of a run can outlive a case. A case is
(id, setup): setup(tmp) prepares its files and returns (argv, what the message must name).
"""

from __future__ import annotations

import functools
import json
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pytest
import torch

import duorl.config.devices as devices
from duorl.cli.main import main
from duorl.cli.configure import load_config
from duorl.config.load import config_to_dict
from duorl.runtime.checkpoint import save_checkpoint
from tests.conftest import TINY

Setup = Callable[[Path], tuple[list[str], tuple[str, ...]]]


@dataclass(frozen=True)
class Case:
    id: str
    setup: Setup
    code: int = 2
    # hide an installed mjlab package from the G1 model lookup (make test installs mjlab: the mjlab extra)
    no_mjlab: bool = False


def _train(tmp: Path, *overrides: str, task: str = "pendulum_swingup", algo: str = "sac", log: bool = True) -> list[str]:
    # not training.torch_threads: train() would set this test process's torch threads
    argv = ["train", "--algo", algo, "--task", task, "--sim", "mujoco", *(o for o in TINY if "torch_threads" not in o)]
    if log:
        argv.append(f"training.log_dir={tmp / 'run'}")
    return argv + list(overrides)


def _cfg(*overrides: str, task: str = "pendulum_swingup", algo: str = "sac") -> dict:
    return config_to_dict(load_config(algo, task, "mujoco", [*TINY, *overrides]))


def _checkpoint_run(tmp: Path, iteration: int = 4, config: dict | None = None, world_size: int = 1,
                    name: str = "run0", header: dict | None = None) -> Path:
    """A finished run's directory as train.py writes it (config, a periodic and a final checkpoint)."""
    run = tmp / name
    (run / "checkpoints").mkdir(parents=True)
    cfg = config if config is not None else _cfg()
    (run / "run_config.json").write_text(json.dumps(cfg))
    rank = {"replay_generator": torch.Generator().get_state(), "collector": None, "replay": None, "replay_origin": 0}
    runtime = {**rank, "world_size": world_size} if world_size == 1 else {"ranks": [rank] * world_size, "world_size": world_size}
    payload = {"learner": {}, "policy": {}, "runtime": runtime, "config": cfg}
    head = {"algo": cfg["algo"]["name"], "task": cfg["task"]["name"], "env_steps": 16 * iteration,
            "world_size": world_size, "collector_state": False, "replay": False, **(header or {})}
    save_checkpoint(run / "checkpoints", iteration // 2, payload, head)
    save_checkpoint(run / "checkpoints", iteration, payload, head, final=True)
    return run


def _clip_file(tmp: Path, name: str = "clip.npz", frames: int = 10, joints: int = 29, bodies: int = 30,
               drop: str | None = None, nan: str | None = None, body_names: list[str] | None = None) -> Path:
    arrays = {
        "fps": np.array([50.0]),
        "joint_pos": np.zeros((frames, joints)), "joint_vel": np.zeros((frames, joints)),
        "body_pos_w": np.zeros((frames, bodies, 3)), "body_quat_w": np.tile([1.0, 0, 0, 0], (frames, bodies, 1)),
        "body_lin_vel_w": np.zeros((frames, bodies, 3)), "body_ang_vel_w": np.zeros((frames, bodies, 3)),
    }
    if body_names is not None:
        arrays["body_names"] = np.array(body_names)
    if nan is not None:
        arrays[nan] = arrays[nan].copy()
        arrays[nan][0] = np.nan
    if drop is not None:
        del arrays[drop]
    path = tmp / name
    with open(path, "wb") as f:
        np.savez(f, **arrays)
    return path


def _wheel(path: Path, with_model: bool) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("mjlab/__init__.py", "")
        if with_model:
            zf.writestr("mjlab/asset_zoo/robots/unitree_g1/xmls/g1.xml", "<mujoco/>")
    return path


def _metrics_run(tmp: Path, tail: bytes = b"", body: bytes | None = None) -> Path:
    run = tmp / "logged"
    run.mkdir()
    rows = b"".join(json.dumps({"iteration": i, "Perf/iteration_ms": float(i)}).encode() + b"\n" for i in range(1, 4))
    (run / "metrics.jsonl").write_bytes((rows if body is None else body) + tail)
    return run


# --------------------------------------------------------------------------------------- the cases
def c(id: str, code: int = 2, no_mjlab: bool = False) -> Callable[[Setup], Case]:
    def wrap(fn: Setup) -> Case:
        CASES.append(Case(id, fn, code, no_mjlab))
        return CASES[-1]
    return wrap


CASES: list[Case] = []

# -- configuration: one bad key, named with its value and a fix
_ONE_KEY = [
    ("algo.batch_size=abc", "algo.batch_size=abc"),
    ("training.num_env=4", "training.num_envs"),
    ("batchsize", "batchsize"),
    ("training.num_envs=0", "training.num_envs=0"),
    ("algo.gamma=1.0", "algo.gamma=1.0"),
    ("algo.tau=1.5", "algo.tau=1.5"),
    ("algo.updates_per_step=0", "algo.updates_per_step=0"),
    ("training.seed=-1", "training.seed=-1"),
    ("algo.actor_hidden_dims=[]", "algo.actor_hidden_dims=[]"),
    ("training.cuda_process_sharing=nvidia", "training.cuda_process_sharing=nvidia"),
    ("training.devices=[gpu0]", "training.devices=[gpu0]"),
    ("training.devices=[0]", "training.devices=[0]"),  # no CUDA here
    ("training.stall_timeout_s=0", "training.stall_timeout_s=0"),
    ("training.wait_report_s=-1", "training.wait_report_s=-1"),
    ("training.max_wall_minutes=0", "training.max_wall_minutes=0"),
    ("training.eval_envs=4", "training.eval_envs=4"),
    ("task.action_range=joint_limits", "task.action_range=joint_limits"),
    ("task.penalty_curriculum=ppo", "task.penalty_curriculum=ppo"),
    ("task.motion_file=clip.npz", "task.motion_file=clip.npz"),  # the pendulum reads no clip
    ("algo.name=flashsac", "algo.name=flashsac"),
    ("sim.tick_cuda_graph=true", "sim.tick_cuda_graph=true"),
    ("debug.slow_phase=nowhere", "debug.slow_phase=nowhere"),
    ("debug.slow_phase=learner:dreaming", "debug.slow_phase=learner:dreaming"),
    ("training.resume=/nonexistent/run", "training.resume=/nonexistent/run"),
    ("algo.buffer_size=4", "algo.batch_size=32"),  # 4 ticks x 4 envs (TINY): fewer transitions than one batch
    ("training.dp_timeout_s=60", "training.dp_timeout_s=60"),  # a one-device run reads no data-parallel key
    # issue #39: true where it cannot be is refused, as the CUDA graph switches are (it became false in silence)
    ("algo.algo_params.torch_compile=true", "algo.algo_params.torch_compile=true"),
]
for _override, _needle in _ONE_KEY:
    c(f"config {_override}")(lambda tmp, o=_override, n=_needle: (_train(tmp, o), (n,)))


@c("config: several bad keys are named at once")
def _(tmp):
    argv = _train(tmp, "algo.batch_size=0", "training.num_env=4", "algo.gamma=2", "algo.updates_per_step=0")
    return argv, ("4 configuration problems", "algo.batch_size=0", "training.num_env=4", "algo.gamma=2", "algo.updates_per_step=0")


@c("config: a cross-key problem is not reported on top of a bad key it reads")
def _(tmp):
    return _train(tmp, "training.eval_envs=x", "training.num_envs=0"), ("2 configuration problems", "training.eval_envs=x", "training.num_envs=0")


@c("config: stall_compile_timeout_s below stall_timeout_s")
def _(tmp):
    return _train(tmp, "training.stall_timeout_s=60", "training.stall_compile_timeout_s=30"), ("training.stall_compile_timeout_s=30",)


@c("config: task.motion_file on g1_walk_flat")
def _(tmp):
    return _train(tmp, "task.motion_file=clip.npz", task="g1_walk_flat"), ("task.motion_file=clip.npz", "g1_walk_flat")


@c("config: unknown task")
def _(tmp):
    return _train(tmp, task="nope"), ("task.name=nope",)


# -- the run directory
# -- tasks from outside duorl (envs/task_sources.py; tests/envs/fake_tasks.py holds the broken factories)
_FAKE = "tests.envs.fake_tasks"
_TASK_SOURCES = [
    ("an unknown name lists the closest", "pendulum_swingap", ("task.name=pendulum_swingap", "did you mean pendulum_swingup")),
    ("an import path that fails to import", f"{_FAKE}_broken:make", ("fails to import", "RuntimeError: broken on purpose")),
    ("an import path whose module is not installed", "no_such_module_xyz:make", ("fails to import", "ModuleNotFoundError")),
    ("an import path to a missing factory", f"{_FAKE}:pendulm", ("has no attribute pendulm", f"{_FAKE}:pendulum")),
    ("a factory that returns no Task", f"{_FAKE}:returns_none", ("returned a NoneType, which is no duorl Task",)),
    ("a factory that raises", f"{_FAKE}:raises", ("raised RuntimeError: no robot model here",)),
    ("a zero-size action", f"{_FAKE}:zero_action", ("duorl cannot train its spaces: action_dim=0",)),
    ("non-float observations (one probe step)", f"{_FAKE}:int_obs", ("observe(sim) returned obs['actor'] as a int64",)),
]
# issue #39: the contract breaks the probe missed or named with a raw torch message (tests/envs/bad_tasks.py;
# each member's message in full: tests/envs/test_task_probe.py), and task modules that end the process at import
_BAD = "tests.envs.bad_tasks"
_TASK_SOURCES += [
    ("reset returns qpos of the wrong width", f"{_BAD}:wide_qpos", ("reset(mask, rng) returned qpos as", "(2, 2)", "(2, 1)")),
    ("a Python float reward", f"{_BAD}:float_reward", ("reward(sim) returned a float (0.5)", "float32 tensor of shape (2,)")),
    ("a reward [N, 1]", f"{_BAD}:column_reward", ("reward(sim) returned a float32 tensor of shape (2, 1)",)),
    ("a float terminated", f"{_BAD}:float_terminated", ("terminated(sim) returned a float32 tensor", "a bool tensor")),
    ("a terminated [N, 1]", f"{_BAD}:column_terminated", ("terminated(sim) returned a bool tensor of shape (2, 1)",)),
    ("ctrl wider than the actuators", f"{_BAD}:wide_ctrl", ("apply_action(actions) returned a float32 tensor of shape (2, 2)",)),
    ("a model without actuators", f"{_BAD}:no_actuators", ("mj_model() has no actuators (nu=0)",)),
    ("observe returns a tuple", f"{_BAD}:tuple_obs", ("observe(sim) after reset returned a tuple of 2", "'actor' and 'critic'")),
    ("control_dt contradicts substeps * timestep", f"{_BAD}:wrong_control_dt", ("control_dt=0.02 s contradicts", "set control_dt=0.05")),
    ("a mirror not built with Mirror", f"{_BAD}:fake_mirror", ("mirror is a SimpleNamespace, not a duorl.envs.base.Mirror",
                                                              "mirroring twice must give the vector back")),
    ("NaN observations from the start", f"{_BAD}:nan_obs",
     ("observe(sim) after reset returned obs['actor'] with 6 of 6 values NaN or inf", "Allowed: finite values")),
    ("an infinite reward from the start", f"{_BAD}:inf_reward",
     ("reward(sim) after a step returned 2 of 2 values NaN or inf", "make reward(sim) return finite values")),
    ("a module that calls sys.exit at import", "tests.envs.exits_at_import:make", ("called sys.exit(3)", "__main__")),
    ("a module that calls os._exit at import", "tests.envs.os_exits_at_import:make", ("called os._exit(0)",)),
    ("a module that parses argv at import", "tests.envs.parses_argv_at_import:make",
     ("called sys.exit(2)", "the following arguments are required: --robot")),
]
for _id, _task, _says in _TASK_SOURCES:
    c(f"task: {_id}")(lambda tmp, task=_task, says=_says: (_train(tmp, task=task), (f"task.name={task}", *says)))


@c("task: a factory that ignores task.max_episode_steps")
def _(tmp):
    return _train(tmp, "task.max_episode_steps=50", task=f"{_BAD}:ignores_max_episode_steps"), (
        "task.max_episode_steps=50", "ignores it", "max_episode_steps=200", "pass cfg.max_episode_steps")


@c("task: task.robot_xml on a custom task, which does not read it")
def _(tmp):
    return _train(tmp, "task.robot_xml=g1.xml", task=f"{_FAKE}:pendulum"), (
        "task.robot_xml=g1.xml", f"{_FAKE}:pendulum does not declare task.robot_xml")


@c("task: task.robot_xml on the pendulum")
def _(tmp):
    return _train(tmp, "task.robot_xml=g1.xml"), ("task.robot_xml=g1.xml", "pendulum_swingup does not declare task.robot_xml")


@c("task: algo.use_symmetry=true for a task without a mirror")
def _(tmp):
    return _train(tmp, "algo.use_symmetry=true"), ("algo.use_symmetry=true", "pendulum_swingup does not")


@c("run dir: a finished run's directory is refused and resume is offered")
def _(tmp):
    run = _checkpoint_run(tmp)
    return [a for a in _train(tmp) if not a.startswith("training.log_dir")] + [f"training.log_dir={run}"], (
        f"training.log_dir={run}", f"training.resume={run}")


@c("run dir: an existing empty folder")
def _(tmp):
    (tmp / "run").mkdir()
    return _train(tmp), (f"training.log_dir={tmp / 'run'}", "exists")


@c("run dir: an existing file")
def _(tmp):
    (tmp / "run").write_text("x")
    return _train(tmp), (f"training.log_dir={tmp / 'run'}", "not a directory")


@c("run dir: below a file")
def _(tmp):
    (tmp / "afile").write_text("x")
    return _train(tmp, f"training.log_dir={tmp / 'afile' / 'run'}", log=False), (str(tmp / "afile"), "is a file")


@c("run dir: in /proc (cannot be created)")
def _(tmp):
    return _train(tmp, "training.log_dir=/proc/duorl-run", log=False), ("training.log_dir=/proc/duorl-run", "cannot be created")


@c("run dir: a name too long")
def _(tmp):
    long = tmp / ("r" * 300)
    return _train(tmp, f"training.log_dir={long}", log=False), ("training.log_dir=", "cannot be created")


@c("run dir: the default runs/ is a file")
def _(tmp):
    (tmp / "runs").write_text("x")
    return _train(tmp, log=False), ("training.log_dir=runs/pendulum_swingup-sac-", "runs is a file", "set training.log_dir")


@c("run dir: resume into the run's own directory")
def _(tmp):
    run = _checkpoint_run(tmp)
    return _train(tmp, f"training.log_dir={run}", f"training.resume={run}", log=False), (f"training.log_dir={run}",)


@c("run dir: a data-parallel launch refuses an existing directory before any rank starts")
def _(tmp):
    (tmp / "run").mkdir()
    return _train(tmp, "training.devices=[cpu,cpu]"), (f"training.log_dir={tmp / 'run'}",)


# -- the G1 model
@c("g1: task.robot_xml does not exist")
def _(tmp):
    return _train(tmp, f"task.robot_xml={tmp / 'nope.xml'}", task="g1_walk_flat"), ("task.robot_xml=", "nope.xml", "duorl assets g1")


@c("g1: task.robot_xml is not MJCF")
def _(tmp):
    (tmp / "g1.xml").write_text("this is not xml")
    return _train(tmp, f"task.robot_xml={tmp / 'g1.xml'}", task="g1_walk_flat"), (f"task.robot_xml={tmp / 'g1.xml'}", "not a usable G1 model")


@c("g1: task.robot_xml is a model but not a G1")
def _(tmp):
    xml = Path(__file__).resolve().parents[1] / "src" / "duorl" / "envs" / "assets" / "pendulum.xml"
    return _train(tmp, f"task.robot_xml={xml}", task="g1_motion_tracking"), (f"task.robot_xml={xml}", "not a usable G1 model")


@c("g1: DUORL_G1_XML names no file")
def _(tmp):
    os.environ["DUORL_G1_XML"] = str(tmp / "gone.xml")
    return _train(tmp, task="g1_walk_flat"), ("DUORL_G1_XML", "gone.xml", "duorl assets g1")


@c("g1: no model anywhere", no_mjlab=True)
def _(tmp):
    os.environ["DUORL_CACHE_DIR"] = str(tmp / "empty-cache")
    os.environ.pop("DUORL_G1_XML", None)
    return _train(tmp, task="g1_walk_flat"), ("task.robot_xml", "duorl assets g1")


# -- motion clips (the collector's own checks, run before anything is built)
@c("clip: task.motion_file does not exist")
def _(tmp):
    return _train(tmp, f"task.motion_file={tmp / 'gone.npz'}", task="g1_motion_tracking"), (f"task.motion_file={tmp / 'gone.npz'}", "no such file")


@c("clip: not an npz")
def _(tmp):
    (tmp / "clip.npz").write_bytes(b"\x89PNG not a clip")
    return _train(tmp, f"task.motion_file={tmp / 'clip.npz'}", task="g1_motion_tracking"), (f"task.motion_file={tmp / 'clip.npz'}", "not a readable .npz")


# (id, how the clip file is wrong, what the message must say about it)
# (the checks are envs/motion/checks.py's, issue #22; here: that they refuse before anything is built)
_BAD_CLIPS = [
    ("an array is missing", dict(drop="body_quat_w"), "body_quat_w: missing"),
    ("non-finite values", dict(nan="joint_pos"), "non-finite value"),
    ("the wrong number of joints", dict(joints=23), "23 joint columns"),
    ("a single frame", dict(frames=1), "1 frame(s)"),
    ("bodies without names that do not match the model", dict(bodies=5), "body_names"),
    ("a pelvis on no floor", dict(bodies=2, body_names=["pelvis", "head"]), "0 m above the floor"),
]
for _id, _how, _says in _BAD_CLIPS:
    def _bad_clip(tmp, how=_how, says=_says):
        p = _clip_file(tmp, **how)
        return _train(tmp, f"task.motion_file={p}", task="g1_motion_tracking"), (f"task.motion_file={p}", says)
    c(f"clip: {_id}")(_bad_clip)


@functools.lru_cache(maxsize=1)
def _synthetic() -> dict[str, np.ndarray]:
    """The synthetic G1 clip (10 s at 50 fps) as canonical arrays: a clip every check accepts."""
    from duorl.envs.g1 import model as g1
    from duorl.envs.motion.synth import synthesize
    from tests.envs.motion_files import canonical_arrays

    return canonical_arrays(synthesize(g1.load(), seconds=10.0, fps=50.0))


def _clip_from_synthetic(tmp: Path, change: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]) -> Path:
    from tests.envs.motion_files import write_canonical

    return write_canonical(tmp / "clip.npz", change({k: v.copy() for k, v in _synthetic().items()}))


def _frames(a: dict[str, np.ndarray], rows: slice) -> dict[str, np.ndarray]:
    return {k: v[rows] if k not in ("fps", "body_names") else v for k, v in a.items()}


def _poke(a: dict[str, np.ndarray], key: str, value: float) -> dict[str, np.ndarray]:
    a[key].reshape(-1)[7] = value
    return a


# (id, how the synthetic clip is changed, what the message must say)
_BAD_REAL_CLIPS = [
    ("fps stored as text", lambda a: {**a, "fps": np.array(["50"])}, ("fps: holds text",)),
    ("complex joint_pos", lambda a: {**a, "joint_pos": a["joint_pos"].astype(complex)}, ("joint_pos: holds complex numbers",)),
    ("joint_pos as text", lambda a: {**a, "joint_pos": a["joint_pos"].astype(str)}, ("joint_pos: holds text",)),
    ("a NaN in joint_vel (stored only)", lambda a: _poke(a, "joint_vel", np.nan), ("joint_vel: 1 non-finite value",)),
    ("an inf in body_pos_w (stored only)", lambda a: _poke(a, "body_pos_w", np.inf), ("body_pos_w: 1 non-finite value",)),
    ("two frames", lambda a: _frames(a, slice(0, 2)), ("2 frame(s) at fps=50", "under the 1 s a clip needs")),
    ("sped up 10x (every 10th frame, fps unchanged)", lambda a: _frames(a, slice(None, None, 10)),
     ("joint_vel: the stored rates are", "not 50", "--fps")),
]
for _id, _change, _says in _BAD_REAL_CLIPS:
    def _bad_real_clip(tmp, change=_change, says=_says):
        p = _clip_from_synthetic(tmp, change)
        return _train(tmp, f"task.motion_file={p}", task="g1_motion_tracking"), (f"task.motion_file={p}", *says)
    c(f"clip: {_id}")(_bad_real_clip)


@c("clip: a CSV without the root columns")
def _(tmp):
    p = tmp / "joints.csv"
    np.savetxt(p, _synthetic()["joint_pos"][:100], delimiter=",")
    return _train(tmp, f"task.motion_file={p}", task="g1_motion_tracking"), (
        f"task.motion_file={p}", "columns 1-7", "the root columns are missing")


# -- resume: the checkpoint is readable and this run can continue it (the cause first)
@c("resume: latest.json is not JSON")
def _(tmp):
    run = _checkpoint_run(tmp)
    (run / "checkpoints" / "latest.json").write_text("{torn")
    return _train(tmp, f"training.resume={run}"), (f"training.resume={run}", "latest.json is corrupt", "iter_000002.pt")


@c("resume: latest.json is binary")
def _(tmp):
    run = _checkpoint_run(tmp)
    (run / "checkpoints" / "latest.json").write_bytes(b"\xff\xfe\x00garbage")
    return _train(tmp, f"training.resume={run}"), (f"training.resume={run}", "latest.json is corrupt")


@c("resume: latest.json names a missing file")
def _(tmp):
    run = _checkpoint_run(tmp)
    (run / "checkpoints" / "final.pt").unlink()
    return _train(tmp, f"training.resume={run}"), (f"training.resume={run}", "final.pt, which is missing", "iter_000002.pt")


@c("resume: a truncated checkpoint")
def _(tmp):
    run = _checkpoint_run(tmp)
    final = run / "checkpoints" / "final.pt"
    final.write_bytes(final.read_bytes()[:100])
    return _train(tmp, f"training.resume={run}"), (f"training.resume={run}", "unreadable", "training.resume=" + str(run / "checkpoints" / "iter_000002.pt"))


@c("resume: a file that is not a checkpoint")
def _(tmp):
    (tmp / "x.pt").write_bytes(os.urandom(64))
    return _train(tmp, f"training.resume={tmp / 'x.pt'}"), (f"training.resume={tmp / 'x.pt'}", "unreadable")


@c("resume: a checkpoint of another format version")
def _(tmp):
    run = _checkpoint_run(tmp, header={"format_version": 99})
    return _train(tmp, f"training.resume={run}"), (f"training.resume={run}", "format version 99")


@c("resume: a checkpoint without a config")
def _(tmp):
    torch.save({"header": {"format_version": 1, "iteration": 2}}, tmp / "bare.pt")
    return _train(tmp, f"training.resume={tmp / 'bare.pt'}"), ("holds no config",)


@c("resume: a folder without checkpoints")
def _(tmp):
    (tmp / "empty").mkdir()
    return _train(tmp, f"training.resume={tmp / 'empty'}"), (f"training.resume={tmp / 'empty'}", "no checkpoint found")


@c("resume: another task, named first with the fix that applies")
def _(tmp):
    run = _checkpoint_run(tmp, config=_cfg(task="g1_walk_flat"))
    return _train(tmp, f"training.resume={run}"), (
        "was written by a --task g1_walk_flat --algo sac run, and this run is --task pendulum_swingup --algo sac",
        "more keys differ", "resume it with --task g1_walk_flat --algo sac")


@c("resume: another algorithm")
def _(tmp):
    run = _checkpoint_run(tmp, config=_cfg(algo="flashsac"))
    return _train(tmp, f"training.resume={run}"), ("--algo flashsac", "resume it with --task pendulum_swingup --algo flashsac")


@c("resume: a key that must match, and the override that sets it back")
def _(tmp):
    run = _checkpoint_run(tmp, config=_cfg("algo.gamma=0.9", "algo.batch_size=16"))
    return _train(tmp, f"training.resume={run}", "algo.max_iterations=10"), (
        "algo.gamma: checkpoint=0.9", "set them to the checkpoint's values: algo.batch_size=16 algo.gamma=0.9")


@c("resume: algo.max_iterations below the checkpoint's iteration")
def _(tmp):
    run = _checkpoint_run(tmp, iteration=8)
    return _train(tmp, f"training.resume={run}", "algo.max_iterations=4"), ("algo.max_iterations=4", "iteration 8", "algo.max_iterations=16")


@c("resume: algo.max_iterations equal to the checkpoint's iteration")
def _(tmp):
    run = _checkpoint_run(tmp, iteration=8)
    return _train(tmp, f"training.resume={run}", "algo.max_iterations=8"), ("algo.max_iterations=8", "nothing would be trained")


@c("resume: a data-parallel checkpoint on one device")
def _(tmp):
    run = _checkpoint_run(tmp, world_size=2)
    return _train(tmp, f"training.resume={run}", "algo.max_iterations=10"), ("world size 2", "2 device(s) in training.devices")


@c("resume: a checkpoint older than a key of this duorl")
def _(tmp):
    cfg = _cfg()
    del cfg["algo"]["decay_step"]
    run = _checkpoint_run(tmp, config=cfg)
    return _train(tmp, f"training.resume={run}", "algo.max_iterations=10"), ("older duorl", "algo.decay_step")


# -- the other commands
@c("play: latest.json is corrupt")
def _(tmp):
    run = _checkpoint_run(tmp)
    (run / "checkpoints" / "latest.json").write_text("not json")
    return ["play", str(run)], ("latest.json is corrupt", "--checkpoint", "iter_000002.pt")


@c("play: run_config.json is corrupt")
def _(tmp):
    run = _checkpoint_run(tmp)
    (run / "run_config.json").write_text("{")
    return ["play", str(run)], ("run_config.json is corrupt",)


@c("play: not a run directory")
def _(tmp):
    (tmp / "elsewhere").mkdir()
    return ["play", str(tmp / "elsewhere")], ("is not a duorl run directory", "run_config.json")


@c("play: --checkpoint names a missing file")
def _(tmp):
    run = _checkpoint_run(tmp)
    return ["play", str(run), "--checkpoint", str(tmp / "gone.pt")], ("gone.pt", "unreadable", "--checkpoint")


@c("play: --episodes 0")
def _(tmp):
    run = _checkpoint_run(tmp)
    return ["play", str(run), "--episodes", "0"], ("--episodes=0",)


@c("play: --checkpoint of another task's run")
def _(tmp):
    run = _checkpoint_run(tmp)
    other = _checkpoint_run(tmp, config=_cfg(task="g1_walk_flat"), name="other")
    ckpt = other / "checkpoints" / "final.pt"
    return ["play", str(run), "--checkpoint", str(ckpt)], (
        f"--checkpoint={ckpt}", "was written by a --task g1_walk_flat --algo sac run", f"the run {run}", "Fix: ")


@c("play: --checkpoint of a run with other network shapes")
def _(tmp):
    run = _checkpoint_run(tmp)
    other = _checkpoint_run(tmp, config=_cfg("algo.actor_hidden_dims=[16]"), name="other")
    ckpt = other / "checkpoints" / "final.pt"
    return ["play", str(run), "--checkpoint", str(ckpt)], (f"--checkpoint={ckpt}", "algo.actor_hidden_dims")


@c("play: a run of a package task whose module is not importable")
def _(tmp):
    cfg = _cfg()
    cfg["task"]["name"] = "no_such_task_module_xyz:make"
    run = _checkpoint_run(tmp, config=cfg)
    return ["play", str(run)], ("task.name=no_such_task_module_xyz:make", "fails to import", "PYTHONPATH")


@c("motion synth: --seconds 1e9 (a 373 GiB array before)")
def _(tmp):
    return ["motion", "synth", str(tmp / "clip.npz"), "--seconds", "1e9"], (
        "--seconds=1e+09", "180,001", "Fix: --seconds 3600 or less")


@c("metrics: a binary file")
def _(tmp):
    (tmp / "plot.png").write_bytes(b"\x89PNG\r\n\x1a\n" + os.urandom(32))
    return ["metrics", str(tmp / "plot.png")], (str(tmp / "plot.png"), "binary data")


@c("metrics: a malformed line before the last")
def _(tmp):
    run = _metrics_run(tmp, body=b'{"iteration": 1}\n{oops\n{"iteration": 3}\n')
    return ["metrics", str(run)], ("metrics.jsonl:2",)


@c("metrics: a missing run directory")
def _(tmp):
    return ["metrics", str(tmp / "gone")], (str(tmp / "gone"), "does not exist")


@c("metrics: --last 0")
def _(tmp):
    run = _metrics_run(tmp)
    return ["metrics", str(run), "--last", "0"], ("--last",)


@c("plot: a missing run directory")
def _(tmp):
    return ["plot", str(tmp / "gone")], (f"RUN_DIR={tmp / 'gone'}", "does not exist")


@c("plot: a file, not a directory")
def _(tmp):
    (tmp / "afile").write_text("x")
    return ["plot", str(tmp / "afile")], (f"RUN_DIR={tmp / 'afile'}", "is not a directory")


@c("plot: a directory without metrics.jsonl")
def _(tmp):
    (tmp / "empty").mkdir()
    return ["plot", str(tmp / "empty")], (f"RUN_DIR={tmp / 'empty'}", "has no metrics.jsonl")


@c("plot: metrics.jsonl without rows")
def _(tmp):
    run = _metrics_run(tmp, body=b"")
    return ["plot", str(run)], (f"RUN_DIR={run}", "no rows yet")


@c("plot: a malformed line before the last")
def _(tmp):
    run = _metrics_run(tmp, body=b'{"iteration": 1}\n{oops\n{"iteration": 3}\n')
    return ["plot", str(run)], ("metrics.jsonl:2",)


@c("motion synth: an unwritable path")
def _(tmp):
    return ["motion", "synth", "/proc/duorl/clip.npz"], ("OUT.npz=/proc/duorl/clip.npz", "cannot be written")


@c("motion synth: a folder")
def _(tmp):
    (tmp / "out").mkdir()
    return ["motion", "synth", str(tmp / "out")], (f"OUT.npz={tmp / 'out'}", "is a folder")


@c("motion synth: below a file")
def _(tmp):
    (tmp / "afile").write_text("x")
    return ["motion", "synth", str(tmp / "afile" / "clip.npz")], (str(tmp / "afile"), "is a file")


@c("motion import: OUT.npz is SRC")
def _(tmp):
    p = _clip_from_synthetic(tmp, lambda a: a)
    return ["motion", "import", str(p), str(p)], (f"OUT.npz={p}", "is SRC itself")


@c("motion import: OUT.npz is SRC by another path")
def _(tmp):
    p = _clip_from_synthetic(tmp, lambda a: a)
    (tmp / "sub").mkdir()
    return ["motion", "import", str(p), str(tmp / "sub" / ".." / p.name)], ("is SRC itself",)


@c("motion import: an unwritable OUT.npz")
def _(tmp):
    p = _clip_from_synthetic(tmp, lambda a: a)
    return ["motion", "import", str(p), "/proc/duorl/out.npz"], ("OUT.npz=/proc/duorl/out.npz", "cannot be written")


@c("motion inspect: an unwritable --plot")
def _(tmp):
    p = _clip_from_synthetic(tmp, lambda a: a)
    return ["motion", "inspect", str(p), "--plot", "/proc/duorl/clip.png"], ("--plot=/proc/duorl/clip.png", "cannot be written")


@c("play: --video to an unwritable path")
def _(tmp):
    run = _checkpoint_run(tmp)
    return ["play", str(run), "--video", "/proc/duorl/v.mp4"], ("--video=/proc/duorl/v.mp4", "cannot be written")


@c("memory: an actor 99,999,999 wide")
def _(tmp):
    return _train(tmp, "algo.actor_hidden_dims=[99999999]"), ("the networks", "algo.actor_hidden_dims=[99999999]")


@c("bench dp: --devices 0,1 without those GPUs")
def _(tmp):
    return ["bench", "dp", "--sim", "mujoco", "--devices", "0,1"], ("--devices=0,1", "training.devices=[0]", "no CUDA")


@c("bench mps: no MPS daemon")
def _(tmp):
    os.environ["CUDA_MPS_PIPE_DIRECTORY"] = str(tmp / "no-mps")  # no daemon there, on any machine
    return ["bench", "mps", "--sim", "mujoco"], ("the mps run cannot start", "CUDA MPS requested")


@c("bench: an unwritable --out")
def _(tmp):
    return ["bench", "learner", "--out", "/proc/duorl/out.json"], ("--out=/proc/duorl/out.json", "cannot be written")


@c("assets: --wheel names a missing file")
def _(tmp):
    return ["assets", "g1", "--wheel", str(tmp / "missing.whl")], (f"--wheel={tmp / 'missing.whl'}", "no such file")


@c("assets: --wheel is not a zip")
def _(tmp):
    (tmp / "fake.whl").write_text("not a zip")
    return ["assets", "g1", "--wheel", str(tmp / "fake.whl")], (f"--wheel={tmp / 'fake.whl'}", "not a wheel")


@c("bench learner: --device cuda without CUDA")
def _(tmp):
    return ["bench", "learner", "--device", "cuda"], ("--device=cuda", "no CUDA device", "--device cpu")


@c("bench learner: --device cuda:3 without CUDA")
def _(tmp):
    return ["bench", "learner", "--device", "cuda:3"], ("--device=cuda:3", "--device cpu")


@c("bench learner: --device nonsense")
def _(tmp):
    return ["bench", "learner", "--device", "gpu"], ("--device=gpu", "not a device")


@c("bench collector: --device cuda without CUDA")
def _(tmp):
    return ["bench", "collector", "--task", "pendulum_swingup", "--sim", "mujoco", "--device", "cuda"], ("--device=cuda", "--device cpu")


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    monkeypatch.setattr(devices, "cuda_device_count", lambda: 0)  # the same cases on a GPU machine
    monkeypatch.chdir(tmp_path)  # a default run directory would appear here
    saved = {var: os.environ.get(var) for var in ("DUORL_G1_XML", "DUORL_CACHE_DIR", "CUDA_MPS_PIPE_DIRECTORY")}  # cases may set these
    yield
    for var, value in saved.items():
        if value is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = value


def test_the_matrix_covers_every_gap() -> None:
    assert len(CASES) >= 60
    assert len({case.id for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input_is_refused_before_anything_is_built(case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    if case.no_mjlab:
        from duorl.envs.g1 import assets

        monkeypatch.setattr(assets, "installed_mjlab_xml", lambda: None)
    argv, names = case.setup(tmp_path)
    before = _files(tmp_path)
    capsys.readouterr()
    assert main(argv) == case.code
    out, err = capsys.readouterr()
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err and "Fix: " in err, err
    for name in names:
        assert name in err, (name, err)
    assert _files(tmp_path) == before, "a refusal left files behind"
    assert "run directory" not in out


@pytest.mark.parametrize("how", ["mjlab missing", "unknown id", "--sim mujoco"])
def test_mjlab_tasks_are_refused_before_anything_is_built(how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """The mjlab: cases, with stand-ins for duorl.envs.mjlab's contract (mjlab itself may be installed or not)."""
    from tests.envs.fake_tasks import fake_mjlab

    fake_mjlab(monkeypatch, [], installed=how != "mjlab missing")
    task = "mjlab:Mjlab-Cartpole-Swingap" if how == "unknown id" else "mjlab:Mjlab-Cartpole-Swingup"
    argv = _train(tmp_path, task=task)
    argv[argv.index("--sim") + 1] = "mujoco" if how == "--sim mujoco" else "mjwarp"
    names = {"mjlab missing": ("pip install 'duorl[mjlab]'",),
             "unknown id": (f"task.name={task}", "closest: mjlab:Mjlab-Cartpole-Swingup"),
             "--sim mujoco": ("sim.name=mujoco", "always steps MuJoCo Warp", "--sim mjwarp")}[how]
    before = _files(tmp_path)
    capsys.readouterr()
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert err.startswith("error: ") and err.count("\n") == 1 and "Fix: " in err, err
    for name in names:
        assert name in err, (name, err)
    assert _files(tmp_path) == before and "run directory" not in out


def test_the_checks_build_a_package_task_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Config validation, the learner's spec and the contract probe share one build (a slow factory ran
    three times before the run directory existed); refused here by the memory check, the last one."""
    from tests.envs import bad_tasks

    bad_tasks.CALLS[0] = 0
    assert main(_train(tmp_path, "algo.actor_hidden_dims=[99999999]", task="tests.envs.bad_tasks:counted")) == 2
    assert "the networks" in capsys.readouterr().err
    assert bad_tasks.CALLS[0] == 1


def test_a_path_key_expands_the_home_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """training.log_dir=~/x made a literal ./~/x (issue #39); every path key expands ~, in one place."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    cfg = load_config("sac", "g1_motion_tracking", "mujoco", [*TINY, "training.log_dir=~/runs/a",
                                                              "task.motion_file=~/clip.npz", "task.robot_xml=~/g1.xml"])
    home = str(tmp_path / "home")
    assert cfg.training.log_dir == f"{home}/runs/a"
    assert (cfg.task.motion_file, cfg.task.robot_xml) == (f"{home}/clip.npz", f"{home}/g1.xml")


def test_a_yaml_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    from duorl.config.errors import ConfigError
    from duorl.config.load import _read_yaml

    bad = tmp_path / "latin1.yaml"
    bad.write_bytes("algo:\n  batch_size: 256  # caf\xe9\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=r"is not UTF-8 text \(byte \d+.*Fix: save the file as UTF-8") as e:
        _read_yaml(bad)
    assert e.value.key == str(bad) and "\n" not in str(e.value)


def test_learning_starts_beyond_the_run_is_warned_before_it_starts() -> None:
    """algo.learning_starts the run never reaches completed with zero updates and no word (issue #39)."""
    from duorl.cli.preflight import no_update_warning

    cfg = load_config("sac", "pendulum_swingup", "mujoco", [*TINY, "algo.max_iterations=20", "algo.learning_starts=50"])
    said = no_update_warning(cfg)
    assert said is not None and said.startswith("algo.learning_starts=50: the run collects 19 ticks")
    assert "end without a single update" in said and "raise algo.max_iterations to at least 51" in said
    ok = load_config("sac", "pendulum_swingup", "mujoco", [*TINY, "algo.max_iterations=20", "algo.learning_starts=19"])
    assert no_update_warning(ok) is None


def test_a_torn_last_line_is_skipped_with_a_note(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for tail in (b'{"iteration": 4, "Perf/iter', b'{"iteration": 4, "Perf/iter\n', b"\0\0\0\0"):
        run = _metrics_run(tmp_path, tail=tail)
        assert main(["metrics", str(run), "--json"]) == 0
        out, err = capsys.readouterr()
        assert json.loads(out)["iterations"] == [1, 3]
        assert ("note: skipped the torn last line" in err) == (tail != b"\0\0\0\0"), err
        (run / "metrics.jsonl").unlink()
        run.rmdir()


def test_default_run_directories_are_unique_and_created_atomically(tmp_path: Path) -> None:
    from duorl.telemetry.run_dir_claim import claim_run_dir

    base = tmp_path / "runs" / "task-algo-20260101-000000"
    made = [claim_run_dir(None, base) for _ in range(3)]  # three runs in the same second
    assert [p.name for p in made] == [base.name, f"{base.name}-2", f"{base.name}-3"]
    assert all(p.is_dir() for p in made)
    with pytest.raises(Exception, match="training.log_dir=.*exists"):
        claim_run_dir(str(made[0]), base)  # an explicit one that appeared since the checks
