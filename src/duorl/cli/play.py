"""`duorl play RUN_DIR`: deterministic evaluation of a run's policy (latest or chosen checkpoint).

N episodes run as N parallel envs of the run's task on the CPU `mujoco` backend (the same task code
as training on either backend), each from its own seeded start, with the deterministic action
tanh(mean). Same run, same checkpoint, same N: same numbers. A task with diagnostics (EnvSpec.metric_names,
e.g. the G1 walking task's lin_vel_error) also gets their means over every step of the N episodes.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from duorl.config.seeding import derive_seed


@dataclass(frozen=True)
class PlayResult:
    checkpoint: str
    iteration: int
    episodes: int
    mean_return: float
    min_return: float
    max_return: float
    mean_length: float
    video: str | None = None
    # the task's diagnostics (EnvSpec.metric_names), each a mean over every step of the episodes
    metrics: dict[str, float] = field(default_factory=dict)


class PlayError(RuntimeError):
    pass


_RUN_FIX = "give a directory that `duorl train` wrote (it prints 'duorl: run directory ...')"


def load_run(run_dir: Path, checkpoint: str | None) -> tuple[Any, Path, dict[str, Any]]:
    from duorl.config.errors import ConfigError
    from duorl.cli.configure import config_from_dict
    from duorl.runtime.checkpoint import CheckpointError, checkpoint_files, latest_checkpoint, load_checkpoint

    cfg_path = run_dir / "run_config.json"
    if not cfg_path.is_file():
        raise PlayError(f"{run_dir} is not a duorl run directory: {cfg_path} is missing. Fix: {_RUN_FIX}")
    try:
        saved = json.loads(cfg_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:  # ValueError: not UTF-8 or not JSON
        raise PlayError(f"{cfg_path} is corrupt ({type(e).__name__}: {e}). Fix: {_RUN_FIX}") from None
    try:
        cfg = config_from_dict(saved)
    except ConfigError as e:
        if isinstance(saved, dict) and isinstance(saved.get("task"), dict) and e.key == "task.name":
            # the run's task does not load here (a package task whose module is not importable): the cause
            raise PlayError(f"{run_dir}: its {e}") from None
        raise PlayError(f"{cfg_path} is corrupt ({type(e).__name__}: {e}). Fix: {_RUN_FIX}") from None
    path = Path(checkpoint) if checkpoint else None
    try:
        path = path or latest_checkpoint(run_dir)
        data = load_checkpoint(path)
    except CheckpointError as e:
        others = [n for n in checkpoint_files(run_dir) if path is None or n != path.name]
        fix = (f"play another checkpoint: --checkpoint {run_dir / 'checkpoints' / others[-1]} (there: {', '.join(others)})"
               if others else "play a run that wrote a checkpoint")
        raise PlayError(f"{e}. Fix: {fix}") from None
    _check_checkpoint_of_run(run_dir, cfg, path, data)
    return cfg, path, data


def _check_checkpoint_of_run(run_dir: Path, cfg: Any, path: Path, data: dict[str, Any]) -> None:
    """--checkpoint of another run's task, algorithm or network shapes is refused as resume refuses it
    (cli/resume.py), before its state meets the run's networks."""
    from duorl.cli.resume import config_mismatches, identity_mismatch
    from duorl.config.load import config_to_dict

    saved, current = data.get("config"), config_to_dict(cfg)
    if not isinstance(saved, dict):
        return
    fix = f"play it with the run directory that wrote it, or pick a checkpoint of {run_dir / 'checkpoints'}"
    found = identity_mismatch(path, saved, current, type(cfg.task), this=f"the run {run_dir}")
    if found is not None:
        raise PlayError(f"--checkpoint={path}: {found[0]}. Allowed: {found[1]}. Fix: {fix}")
    shapes = [k for k in config_mismatches(saved, current, type(cfg.task)) if "hidden" in k or "dim" in k or
              "blocks" in k or "atoms" in k]
    if shapes:
        raise PlayError(f"--checkpoint={path}: its networks differ from the run {run_dir}'s ({', '.join(shapes)}). "
                        f"Allowed: a checkpoint of that run. Fix: {fix}")


def evaluate(
    run_dir: Path, episodes: int = 8, checkpoint: str | None = None, video: str | None = None, sim: str = "mujoco"
) -> PlayResult:
    if episodes < 1:
        raise PlayError(f"--episodes={episodes}: must be >= 1. Fix: e.g. --episodes 8")
    cfg, path, data = load_run(Path(run_dir), checkpoint)
    writer = check_video(video) if video else None  # before any episode (and before the envs are built)
    from duorl.algos.registry import make_actor
    from duorl.envs.registry import env_spec, make_vec_env

    spec = env_spec(cfg.task)
    actor = make_actor(cfg.algo, spec, torch.device("cpu"))
    actor.load_state_dict(data["policy"])
    actor.eval()
    sim_cfg = replace(cfg.sim, name=sim)
    env = make_vec_env(cfg.task, sim_cfg, episodes, "cpu", derive_seed(cfg.training.seed, "play"), True, play=True,
                       render=writer is not None)
    recorder = _VideoRecorder(env, writer) if writer is not None else None

    obs = env.reset()
    finished = torch.zeros(episodes, dtype=torch.bool)
    returns = torch.zeros(episodes, dtype=torch.float64)
    lengths = torch.zeros(episodes, dtype=torch.float64)
    metric_sums = torch.zeros(len(spec.metric_names), dtype=torch.float64)
    metric_steps = 0.0
    with torch.no_grad():
        # every episode ends by the time limit at the latest
        for _ in range(spec.max_episode_steps + 1):
            if recorder is not None and not bool(finished[0]):
                recorder.frame()
            obs, _, terminated, truncated, info = env.step(actor.act(obs["actor"]))
            if spec.metric_names:  # per env [N, M]; an env counts until its first episode ends
                live = (~finished).double()
                metric_sums += (info["metrics"].double() * live.unsqueeze(1)).sum(dim=0)
                metric_steps += float(live.sum())
            new = (terminated | truncated) & ~finished
            returns = torch.where(new, info["episode_return"].double(), returns)
            lengths = torch.where(new, info["episode_length"].double(), lengths)
            finished |= new
            if bool(finished.all()):
                break
    env.close()
    out = recorder.write(video) if recorder is not None else None
    return PlayResult(
        checkpoint=str(path),
        iteration=int(data["header"]["iteration"]),
        episodes=episodes,
        mean_return=float(returns.mean()),
        min_return=float(returns.min()),
        max_return=float(returns.max()),
        mean_length=float(lengths.mean()),
        video=out,
        metrics={name: float(v) / max(metric_steps, 1.0) for name, v in zip(spec.metric_names, metric_sums)},
    )


def _render_model(task: Any) -> Any:
    """The G1 with its visual meshes where they are at hand (same qpos layout), else the task's own model."""
    xml = getattr(task, "xml_path", None)
    if xml is not None:
        from duorl.envs.g1 import model as g1

        try:
            return g1.build_model(xml, visuals=True)
        except Exception:  # noqa: BLE001 - no meshes beside the model file: draw the collision geoms
            pass
    return task.mj_model()


REFERENCE_RGBA = (0.2, 0.85, 0.35, 0.35)  # the reference pose: a translucent green ghost


def add_reference(model: Any, ref_data: Any, scene: Any, option: Any) -> int:
    """Append the geoms of `ref_data` (a second pose of `model`, kinematics done) to an updated
    `scene` as a translucent ghost; returns how many were added. Needs no OpenGL."""
    import mujoco

    first = scene.ngeom
    mujoco.mjv_addGeoms(model, ref_data, option, mujoco.MjvPerturb(), mujoco.mjtCatBit.mjCAT_DYNAMIC, scene)
    for i in range(first, scene.ngeom):
        scene.geoms[i].rgba[:] = REFERENCE_RGBA
    return scene.ngeom - first


def _mp4_writer() -> dict[str, Any]:
    """imageio's arguments for an installed MP4 encoder (imageio-ffmpeg's, else PyAV's), checked before
    any episode runs: without one, imageio falls back to a writer that cannot take frames per second."""
    if importlib.util.find_spec("imageio") is None:
        raise PlayError("--video: writing a video needs imageio with ffmpeg, not installed here. Fix: pip install "
                        "'duorl[video]', or play without --video")
    if importlib.util.find_spec("imageio_ffmpeg") is not None:
        return {"plugin": "FFMPEG"}
    if importlib.util.find_spec("av") is not None:
        return {"plugin": "pyav", "codec": "libx264"}
    raise PlayError("--video: writing a video needs an MP4 encoder for imageio, none is installed here. Fix: pip "
                    "install 'duorl[video]' (imageio-ffmpeg) or pip install av, or play without --video")


def _renderer(model: Any, height: int, width: int) -> Any:
    """MuJoCo's offscreen renderer for `model`, or a PlayError saying what this machine lacks."""
    import warnings

    import mujoco

    if not hasattr(mujoco, "Renderer"):  # mujoco hides the renderer when PyOpenGL does not import
        raise PlayError("--video: MuJoCo's renderer needs PyOpenGL, which does not import here. Fix: pip install "
                        "'duorl[video]' (or pip install PyOpenGL), or play without --video")
    try:
        with warnings.catch_warnings():  # GLFW warns on stderr before it fails: the error below says it all
            warnings.simplefilter("ignore")
            return mujoco.Renderer(model, height=height, width=width)
    except Exception as e:  # noqa: BLE001 - any GL failure means: no video on this machine
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise PlayError(
            f"--video: MuJoCo's renderer needs an OpenGL backend, and none works here ({first}). Fix: on a GPU "
            "machine set MUJOCO_GL=egl; on a CPU-only one apt-get install libosmesa6 and set MUJOCO_GL=osmesa "
            "PYOPENGL_PLATFORM=osmesa; or play without --video"
        ) from e


def check_video(path: str) -> dict[str, Any]:
    """Everything --video needs, before any episode is played: a path that can be written, an MP4
    encoder, and an OpenGL context for MuJoCo's renderer (tried on a one-geom model). Returns the
    encoder's imageio arguments; raises PlayError (exit 2) naming what is missing."""
    import os

    from duorl.cli.preflight import check_output_file
    from duorl.config.errors import InputRefused

    try:
        check_output_file(path, "--video")
    except InputRefused as e:
        raise PlayError(str(e)) from None
    writer = _mp4_writer()
    try:
        import mujoco  # MUJOCO_GL picks the OpenGL backend while mujoco imports: a missing one fails here
    except Exception as e:  # noqa: BLE001 - e.g. osmesa without PYOPENGL_PLATFORM=osmesa
        raise PlayError(f"--video: MuJoCo does not import with MUJOCO_GL={os.environ.get('MUJOCO_GL')} "
                        f"({type(e).__name__}: {e}). Fix: on a GPU machine set MUJOCO_GL=egl; on a CPU-only one "
                        "apt-get install libosmesa6 and set MUJOCO_GL=osmesa PYOPENGL_PLATFORM=osmesa") from None
    probe = _renderer(mujoco.MjModel.from_xml_string("<mujoco><worldbody><geom size='1'/></worldbody></mujoco>"), 16, 16)
    probe.close()
    return writer


class _VideoRecorder:
    """Frames of env 0. duorl's own tasks: through MuJoCo's renderer from the backend's state; a task
    with a reference clip (reference_qpos) also gets its reference pose drawn as a ghost where the clip
    puts it (the robot and the ghost overlap while it tracks). An mjlab task: its own offscreen renderer
    (`render_frame()`, its viewer's camera). Both need an OpenGL backend (MUJOCO_GL=egl or osmesa)."""

    def __init__(self, env: Any, writer: dict[str, Any]) -> None:
        self.writer = writer  # check_video's
        self.env = env
        self.frames: list[Any] = []
        self._own_frame = getattr(env, "render_frame", None)  # a whole VecEnv that draws itself (mjlab)
        if self._own_frame is None:
            self._scene_for_task(env.task)

    def _scene_for_task(self, task: Any) -> None:
        import mujoco

        self.model = _render_model(task)
        self.data = mujoco.MjData(self.model)
        self.reference = getattr(task, "reference_qpos", None)
        self.ref_data = mujoco.MjData(self.model) if self.reference is not None else None
        self.option = mujoco.MjvOption()
        self.option.geomgroup[:] = 1  # collision geoms sit in groups MuJoCo hides by default
        self.camera = mujoco.MjvCamera()  # follows the robot from its side
        self.camera.distance, self.camera.azimuth, self.camera.elevation = 3.5, 90.0, -15.0
        self.renderer = _renderer(self.model, 480, 640)

    def frame(self) -> None:
        if self._own_frame is not None:
            self.frames.append(self._own_frame().copy())
            return
        import mujoco

        b = self.env.backend
        self.data.qpos[:] = b.qpos[0].detach().cpu().double().numpy()
        self.data.qvel[:] = b.qvel[0].detach().cpu().double().numpy()
        mujoco.mj_forward(self.model, self.data)
        self.camera.lookat[:] = self.data.qpos[:3]
        self.renderer.update_scene(self.data, self.camera, self.option)
        if self.reference is not None:
            self.ref_data.qpos[:] = self.reference(0).detach().cpu().double().numpy()
            mujoco.mj_kinematics(self.model, self.ref_data)
            add_reference(self.model, self.ref_data, self.renderer.scene, self.option)
        self.frames.append(self.renderer.render().copy())

    def write(self, path: str) -> str:
        import imageio.v3 as iio

        fps = max(1, round(1.0 / self.env.spec.control_dt))
        iio.imwrite(path, self.frames, fps=fps, **self.writer)
        return path


def play_main(run_dir: str, episodes: int, checkpoint: str | None, video: str | None, as_json: bool) -> int:
    from duorl.config.errors import InputRefused
    from duorl.runtime.checkpoint import CheckpointError

    try:
        r = evaluate(Path(run_dir), episodes, checkpoint, video)
    except (PlayError, CheckpointError, InputRefused) as e:  # InputRefused: a late ConfigError (the task's)
        print(f"error: {e}", file=sys.stderr)
        return 2
    if as_json:
        print(json.dumps(r.__dict__))
    else:
        print(f"checkpoint   {r.checkpoint} (iteration {r.iteration})")
        print(f"episodes     {r.episodes}")
        print(f"return       mean {r.mean_return:.3f}  min {r.min_return:.3f}  max {r.max_return:.3f}")
        print(f"length       mean {r.mean_length:.1f}")
        for name, v in r.metrics.items():
            print(f"{name:<12} {v:.4f}")
        if r.video:
            print(f"video        {r.video}")
    return 0
