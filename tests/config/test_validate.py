"""validate(): every bad value is a ConfigError naming the key, the value and the fix, before any build."""

from __future__ import annotations

import dataclasses
import sys
import types

import pytest

import duorl.config.devices as devices
from duorl.cli.configure import load_config
from duorl.config import Config, ConfigError, resolve_device
from duorl.config.tasks import TaskFacts
from duorl.config.validate import validate
from duorl.envs.task_sources import task_names
from duorl.envs.tasks.builtin import BUILTIN

ALGO, TASK = "sac", "pendulum_swingup"


def _error(overrides: list[str], sim: str | None = "mujoco", algo: str = ALGO, task: str = TASK) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_config(algo, task, sim, overrides)
    return info.value


# (overrides, key the message must name, a substring of the fix)
INVALID = [
    (["training.num_envs=0"], "training.num_envs", "training.num_envs=1"),
    (["training.env_steps_per_sync=0"], "training.env_steps_per_sync", "training.env_steps_per_sync=1"),
    (["algo.batch_size=0"], "algo.batch_size", "algo.batch_size=1"),
    (["algo.updates_per_step=-1"], "algo.updates_per_step", "algo.updates_per_step=1"),
    (["algo.updates_per_step=0"], "algo.updates_per_step", "algo.updates_per_step=1"),
    (["algo.policy_frequency=0"], "algo.policy_frequency", "algo.policy_frequency=1"),
    (["algo.gamma=0"], "algo.gamma", "algo.gamma=0.99"),
    (["algo.gamma=1.0"], "algo.gamma", "algo.gamma=0.99"),
    (["algo.gamma=nan"], "algo.gamma", "finite"),
    (["algo.tau=0"], "algo.tau", "algo.tau="),
    (["algo.tau=1.5"], "algo.tau", "algo.tau="),
    (["algo.actor_lr=0"], "algo.actor_lr", "> 0"),
    (["algo.critic_lr=-1e-3"], "algo.critic_lr", "> 0"),
    (["algo.alpha_lr=0"], "algo.alpha_lr", "> 0"),
    (["algo.num_atoms=1"], "algo.num_atoms", "algo.num_atoms=2"),
    (["algo.v_min=5", "algo.v_max=5"], "algo.v_min", "algo.v_max="),
    (["algo.buffer_size=3", "training.env_steps_per_sync=2"], "algo.buffer_size", "raise algo.buffer_size"),
    (["algo.learning_starts=-1"], "algo.learning_starts", "algo.learning_starts=0"),
    (["algo.max_iterations=0"], "algo.max_iterations", "algo.max_iterations=1"),
    (["algo.save_interval=0"], "algo.save_interval", "algo.save_interval=1"),
    (["training.log_interval=0"], "training.log_interval", "training.log_interval=1"),
    (["algo.actor_hidden_dims=[]"], "algo.actor_hidden_dims", "algo.actor_hidden_dims=[256,256]"),
    (["algo.critic_hidden_dims=[256,0]"], "algo.critic_hidden_dims", "algo.critic_hidden_dims=[256,256]"),
    (["algo.log_std_min=0", "algo.log_std_max=0"], "algo.log_std_min", "algo.log_std_max="),
    (["training.dp_gradient_wire_dtype=float16"], "training.dp_gradient_wire_dtype", "=float32"),
    (["training.cuda_process_sharing=nvidia"], "training.cuda_process_sharing", "=null"),
    (["training.seed=-1"], "training.seed", "training.seed=0"),
    (["training.seed=5000000000"], "training.seed", "training.seed=1"),
    (["sim.nthread=-1"], "sim.nthread", "sim.nthread=0"),
    (["debug.collector_delay_ms=-1"], "debug.collector_delay_ms", ">= 0"),
    (["debug.learner_delay_ms=-0.5"], "debug.learner_delay_ms", ">= 0"),
    (["task.max_episode_steps=0"], "task.max_episode_steps", "task.max_episode_steps=1000"),
    (["training.torch_threads=-2"], "training.torch_threads", "training.torch_threads=0"),
    (["training.resume=/nonexistent/run"], "training.resume", "point training.resume at a run directory"),
    (["algo.weight_decay=-0.1"], "algo.weight_decay", ">= 0"),
    (["algo.alpha_init=0"], "algo.alpha_init", "> 0"),
    (["training.devices=[]"], "training.devices", "training.devices=[cpu]"),
    (["training.devices=[gpu0]"], "training.devices", "training.devices=[0]"),
    (["training.devices=[-1]"], "training.devices", "training.devices=[0]"),
    (["training.devices=[cuda]"], "training.devices", "training.devices=[0]"),
    (["training.devices=[true]"], "training.devices", "training.devices=[0]"),
]


@pytest.mark.parametrize(("overrides", "key", "fix"), INVALID, ids=[" ".join(c[0]) for c in INVALID])
def test_invalid_value_names_key_value_and_fix(overrides: list[str], key: str, fix: str) -> None:
    e = _error(overrides)
    msg = str(e)
    assert e.key == key
    assert msg.startswith(key), msg
    assert "Allowed:" in msg and "Fix:" in msg, msg
    assert fix in msg.split("Fix:", 1)[1], msg
    assert "\n" not in msg  # one line for the terminal


DEVICE_LISTS = [
    (["training.devices=[cpu,0]"], "training.devices", "training.devices=[cpu,cpu]"),
    (["training.devices=[cpu,cpu]", "training.data_parallel=false"], "training.data_parallel",
     "remove training.data_parallel"),
    (["training.devices=[0,1]"], "training.devices", "training.devices=[cpu]"),  # no GPU on this machine
]


@pytest.mark.parametrize(("overrides", "key", "fix"), DEVICE_LISTS, ids=[" ".join(c[0]) for c in DEVICE_LISTS])
def test_bad_device_lists_are_refused(overrides: list[str], key: str, fix: str) -> None:
    e = _error(overrides)
    assert e.key == key
    assert fix in str(e).split("Fix:", 1)[1]


def test_one_gpu_twice_is_refused(fake_cuda: None) -> None:
    e = _error(["training.devices=[0,cuda:0]"], sim="mjwarp")
    assert e.key == "training.devices" and "names one GPU twice" in str(e)


def test_data_parallel_settings_load() -> None:
    cfg = load_config(ALGO, TASK, "mujoco", ["training.devices=[cpu,cpu]", "training.dp_gradient_wire_dtype=bfloat16"])
    assert cfg.training.devices == ["cpu", "cpu"] and cfg.training.dp_gradient_wire_dtype == "bfloat16"
    e = _error(["training.dp_timeout_s=0"])
    assert e.key == "training.dp_timeout_s"


@pytest.mark.parametrize("algo", ["flashsac", "warpsac"])
def test_flash_algorithms_load(algo: str) -> None:
    cfg = load_config(algo, TASK, "mujoco", [])
    assert cfg.algo.name == algo
    # the pendulum tunes them to the normalised-return support
    assert (cfg.algo.v_min, cfg.algo.v_max) == (-cfg.algo.normalized_return_max, cfg.algo.normalized_return_max)
    assert (cfg.algo.decay_step > 0) == (algo == "warpsac")  # WarpSAC = FlashSAC + age-biased replay


@pytest.mark.parametrize(("overrides", "key"), [
    (["algo.replay_min_weight=0"], "algo.replay_min_weight"),
    (["algo.replay_min_weight=1.5"], "algo.replay_min_weight"),
    (["algo.decay_step=-1"], "algo.decay_step"),
    (["algo.replay_num_buckets=0"], "algo.replay_num_buckets"),
    (["algo.noise_zeta_max=0"], "algo.noise_zeta_max"),
    (["algo.target_entropy_std=0"], "algo.target_entropy_std"),
    (["algo.normalized_return_max=0"], "algo.normalized_return_max"),
    (["algo.block_expansion=0"], "algo.block_expansion"),
    (["algo.lr_end_ratio=-0.5"], "algo.lr_end_ratio"),
])
def test_flash_settings_are_checked(overrides: list[str], key: str) -> None:
    e = _error(overrides, algo="flashsac")
    assert e.key == key and "Fix:" in str(e)


def test_graph_flag_false_and_null_are_accepted_on_cpu() -> None:
    for v in ("false", "null"):
        cfg = load_config(ALGO, TASK, "mujoco", [f"algo.algo_params.whole_cycle_cuda_graph={v}"])
        assert cfg.algo.algo_params.whole_cycle_cuda_graph in (None, False)


def test_graph_flag_true_needs_cuda() -> None:
    e = _error(["algo.algo_params.whole_cycle_cuda_graph=true"])
    assert e.key == "algo.algo_params.whole_cycle_cuda_graph"
    assert "needs a CUDA device" in str(e) and "=false" in e.fix and "training.devices=[0]" in e.fix


def test_graph_flag_true_on_cuda(fake_cuda: None) -> None:
    cfg = load_config(ALGO, TASK, "mjwarp", ["algo.algo_params.whole_cycle_cuda_graph=true"])
    assert cfg.algo.algo_params.whole_cycle_cuda_graph is True
    e = _error(["algo.algo_params.whole_cycle_cuda_graph=true", "debug.check_replay_window=true"], sim="mjwarp")
    assert e.key == "algo.algo_params.whole_cycle_cuda_graph" and "check_replay_window" in str(e)
    e = _error(["algo.algo_params.whole_cycle_cuda_graph=true", "training.devices=[cpu]"], sim="mjwarp")
    assert "needs a CUDA device" in str(e)


def test_unknown_names() -> None:
    e = _error([], task="no_such_task")
    assert e.key == "task.name" and "pendulum_swingup" in e.allowed and "--task" in e.fix
    e = _error([], sim="bullet")
    assert e.key == "sim.name" and "mujoco" in e.allowed
    e = _error([], algo="ppo")
    assert e.key == "algo.name" and "sac" in e.allowed


def test_boundary_values_are_accepted() -> None:
    cfg = load_config(ALGO, TASK, "mujoco", [
        "algo.updates_per_step=1", "algo.learning_starts=0", "algo.tau=1", "algo.num_atoms=2",
        "training.seed=0", "sim.nthread=0", "algo.buffer_size=8", "training.env_steps_per_sync=4",
        "algo.batch_size=128",  # = algo.buffer_size * training.num_envs (16 on the pendulum): one batch fits
    ])
    assert cfg.algo.tau == 1.0 and cfg.algo.buffer_size == 8


def test_a_ring_smaller_than_one_batch_is_refused_naming_both_keys() -> None:
    # the pendulum runs 16 envs: 8 ticks hold 128 transitions, one batch of 256 does not fit
    e = _error(["algo.buffer_size=8", "algo.batch_size=256"])
    assert e.key == "algo.buffer_size" and "algo.batch_size=256" in str(e) and "training.num_envs" in str(e)
    assert "algo.buffer_size=16" in e.fix and "algo.batch_size to 128" in e.fix
    assert load_config(ALGO, TASK, "mujoco", ["algo.buffer_size=16", "algo.batch_size=256"]).algo.buffer_size == 16


DP_KEYS = ["training.dp_gradient_wire_dtype=bfloat16", "training.dp_timeout_s=60",
           "training.dp_startup_timeout_s=60", "algo.algo_params.dp_whole_cycle_cuda_graph=false"]


@pytest.mark.parametrize("override", DP_KEYS)
def test_data_parallel_keys_on_one_device_are_refused(override: str) -> None:
    from duorl.config.switches import data_parallel_enabled
    from duorl.config.validate import check_data_parallel_keys

    key = override.split("=", 1)[0]
    cfg = load_config(ALGO, TASK, "mujoco", ["training.devices=[cpu]", override])
    assert not data_parallel_enabled(cfg, launched_rank=False)
    with pytest.raises(ConfigError) as info:
        check_data_parallel_keys(cfg, data_parallel=False)
    assert info.value.key == key and "data parallel" in info.value.fix
    # the same key on a data-parallel run (world size 1 included), or at its default, is fine
    for extra in (["training.data_parallel=true"], ["training.devices=[cpu,cpu]"]):
        cfg = load_config(ALGO, TASK, "mujoco", ["training.devices=[cpu]", override, *extra])
        check_data_parallel_keys(cfg, data_parallel_enabled(cfg, launched_rank=False))
    check_data_parallel_keys(load_config(ALGO, TASK, "mujoco", []), data_parallel=False)


# --- devices --------------------------------------------------------------------------------------


def test_cuda_request_without_cuda_is_rejected() -> None:
    for entry in ("0", "cuda:0", "GPU-1234", "MIG-1234"):
        e = _error([f"training.devices=[{entry}]"])
        assert e.key == "training.devices" and "no CUDA device visible" in str(e)
        assert "training.devices=[cpu]" in e.fix


def test_cpu_device_and_automatic_choice_without_cuda() -> None:
    for sim in ("mujoco", "mjwarp"):  # mjwarp on warp's CPU device is allowed
        assert resolve_device(load_config(ALGO, TASK, sim, ["training.devices=[cpu]"])) == "cpu"
        assert resolve_device(load_config(ALGO, TASK, sim, [])) == "cpu"


def test_devices_with_cuda(fake_cuda: None, monkeypatch: pytest.MonkeyPatch) -> None:
    def dev(sim: str, *ov: str) -> str:
        return resolve_device(load_config(ALGO, TASK, sim, list(ov)))

    assert dev("mjwarp") == "cuda:0"
    assert dev("mujoco") == "cpu"  # automatic: mujoco physics is CPU-only, keep the learner with it
    assert dev("mujoco", "training.devices=[1]") == "cuda:1"  # explicit: learner on the GPU
    assert dev("mjwarp", "training.devices=[cuda:1]") == "cuda:1"
    assert dev("mjwarp", "training.devices=[GPU-bbbb]") == "cuda:1"
    assert dev("mjwarp", "training.devices=[cpu]") == "cpu"
    e = _error(["training.devices=[2]"], sim="mjwarp")
    assert "only 2 CUDA device(s) visible" in str(e) and "training.devices=[0]" in e.fix
    e = _error(["training.devices=[GPU-cccc]"], sim="mjwarp")
    assert "nvidia-smi -L" in e.fix
    e = _error(["training.devices=[MIG-xyz]"], sim="mjwarp")
    assert "CUDA_VISIBLE_DEVICES=MIG-xyz" in e.fix
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-xyz")
    assert dev("mjwarp", "training.devices=[MIG-xyz]") == "cuda:0"


def test_best_sim_follows_cuda(fake_cuda: None) -> None:
    assert load_config(ALGO, TASK, None, []).sim.name == "mjwarp"


# --- programmatic configs and fallbacks -----------------------------------------------------------


def test_programmatic_config_with_wrong_types_fails_closed() -> None:
    cfg = Config()
    cfg.training = dataclasses.replace(cfg.training, num_envs="16")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"^training\.num_envs=16: not an integer"):
        validate(cfg, TaskFacts(cfg.task.name))
    cfg = Config()
    cfg.algo = dataclasses.replace(cfg.algo, obs_normalization=1)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="algo.obs_normalization"):
        validate(cfg, TaskFacts(cfg.task.name))


def test_validate_returns_the_config() -> None:
    cfg = Config()
    assert validate(cfg, TaskFacts(cfg.task.name)) is cfg


def test_task_names_are_the_builtin_and_entry_point_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    from duorl.envs import task_sources

    assert set(BUILTIN) <= set(task_names())
    monkeypatch.setattr(task_sources, "_entry_points", lambda: {"b_task": [], "a_task": []})
    assert task_names() == sorted(["a_task", "b_task", *BUILTIN])


@pytest.mark.parametrize(("task", "override", "declared_by"), [
    (TASK, "task.robot_xml=g1.xml", "g1_walk_flat"),
    (TASK, "task.action_range=joint_limits", "g1_walk_flat"),
    ("g1_walk_flat", "task.motion_file=clip.npz", "g1_motion_tracking"),
    ("g1_motion_tracking", "task.penalty_curriculum=off", "g1_walk_flat"),
])
def test_a_key_the_task_does_not_declare_is_refused_naming_the_task(task: str, override: str,
                                                                    declared_by: str) -> None:
    """Each task declares its own keys (envs/tasks/keys.py); another task's key is refused, naming the run's
    task and its keys, never ignored."""
    e = _error([override], task=task)
    key = override.split("=", 1)[0]
    assert e.key == key and f"the task {task} does not declare {key}" in e.problem
    assert e.allowed.startswith("its keys: task.name, task.max_episode_steps")
    assert "`duorl config --keys`" in e.fix
    load_config(ALGO, declared_by, "mujoco", [override])  # the task that declares it takes it


def test_task_keys_are_checked_against_their_own_settings() -> None:
    e = _error(["task.action_range=wide"], task="g1_walk_flat")
    assert e.key == "task.action_range" and "pd, joint_limits" in e.allowed
    e = _error(["task.penalty_curriculum=steep"], task="g1_walk_flat")
    assert e.key == "task.penalty_curriculum" and "ppo, fastsac, off" in e.allowed
    cfg = load_config(ALGO, "g1_walk_flat", "mujoco", ["task.penalty_curriculum=fastsac"])
    assert type(cfg.task).__name__ == "G1WalkConfig" and cfg.task.penalty_curriculum == "fastsac"


def test_validation_happens_before_anything_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    """An invalid config never reaches duorl.cli.train.train (nor any env factory)."""
    from duorl.cli.main import main

    called: list[object] = []
    fake = types.ModuleType("duorl.cli.train")
    fake.train = lambda cfg, prestarted=None: called.append(cfg) or 0  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "duorl.cli.train", fake)
    fake_registry = types.ModuleType("duorl.envs.registry")

    def _no_build(*a: object, **k: object) -> None:
        raise AssertionError("an env was built")

    fake_registry.make_vec_env = _no_build  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "duorl.envs.registry", fake_registry)
    monkeypatch.setattr(devices, "cuda_device_count", lambda: 0)

    assert main(["train", "--sim", "mujoco", "training.cuda_process_sharing=nvidia"]) == 2
    assert main(["train", "--sim", "mujoco", "algo.gamma=2"]) == 2
    assert main(["train", "--algo", "flashsac", "algo.replay_min_weight=0"]) == 2
    assert called == []
    assert main(["train", "--sim", "mujoco", "algo.max_iterations=7"]) == 0
    assert len(called) == 1 and isinstance(called[0], Config) and called[0].algo.max_iterations == 7


def test_config_command_refuses_data_parallel_keys_on_one_device() -> None:
    """`duorl config` runs the same check as `duorl train`."""
    from duorl.cli.configure import config_listing

    with pytest.raises(ConfigError) as info:
        config_listing(ALGO, TASK, "mujoco", ["training.dp_timeout_s=60"])
    assert info.value.key == "training.dp_timeout_s"
    assert "dp_timeout_s: 60.0" in config_listing(ALGO, TASK, "mujoco", ["training.dp_timeout_s=60",
                                                                          "training.devices=[cpu,cpu]"])


@pytest.mark.parametrize("sim,overrides,key", [
    ("mujoco", [], "sim.name"),
    ("mjwarp", ["training.devices=[0]"], "training.devices"),
    ("mjwarp", ["task.max_episode_steps=0"], "task.max_episode_steps"),
])
def test_an_mjlab_task_is_refused_for_what_needs_no_mjlab_before_mjlab_is_imported(sim, overrides, key):
    """The task layer's check imports mjlab's registry (7-25 s on 2 cores); a wrong --sim, device or
    bound is refused first, in a fresh interpreter with mjlab never imported."""
    import subprocess

    if key == "training.devices":
        import torch

        if torch.cuda.is_available():
            pytest.skip("needs a machine without CUDA")
    code = (
        "import sys\n"
        "from duorl.cli.configure import load_config\n"
        "from duorl.config.errors import ConfigError\n"
        "try:\n"
        f"    load_config('sac', 'mjlab:Mjlab-Cartpole-Balance', {sim!r}, {overrides!r})\n"
        "except ConfigError as e:\n"
        "    print(e.key, 'mjlab' in sys.modules)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == [key, "False"], (r.stdout, r.stderr[-2000:])
