"""The configuration schema: every key a user can set, with every fact about it in one place.

Names follow docs/design.md §2. YAML defaults per algo and task (config/defaults/) and `key=value`
overrides are merged onto these dataclasses by `config.load`, then checked by `config.validate`.

Every leaf is declared with `setting(default, "one-line meaning", ...)`: its type (the annotation),
default, bounds or choices, whether a resumed run may change it, and its help. `config.validate` checks
each key against them, `duorl config --keys` and docs/configuration.md print them, and `cli/resume.py`
reads which keys may differ from a checkpoint's; rules between several keys stay in
`config/validate.py` (named functions). tests/config/test_schema.py fails on a number without bounds,
a text without choices (unless declared free-form) or a key without help.
Comments above a key say why a default is what it is; the meaning itself lives in the help text only.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

ALGOS = ("sac", "flashsac", "warpsac")
SIMS = ("mujoco", "mjwarp")
WIRE_DTYPES = ("float32", "bfloat16")  # training.dp_gradient_wire_dtype (distributed/grad_sync.py maps them)
WANDB_MODES = ("online", "offline")  # training.wandb_mode
LAYER_NORM_SILU = ("compile", "fused", "fused_bias")  # algo.algo_params.layer_norm_silu (algos/sac/networks.py)
DEVICES_ALLOWED = "null, [cpu], [N] (a CUDA ordinal), [cuda:N], [GPU-<uuid>] or [MIG-<id>]"

# Setting.resume: a resumed run may change where and how long it runs, how it reports, and test hooks;
# every other key shapes the learner, the replay or the envs and must match the checkpoint.
MAY_DIFFER = "may differ"
MUST_MATCH = "must match"


@dataclass(frozen=True)
class Setting:
    """Everything about one key besides its type and default (both on the dataclass field).

    Bounds: `min`/`max` inclusive, `above`/`below` exclusive (numbers; for a list of ints, each
    element). `choices`: the values a text key takes (null too when its type is Optional).
    `free_form`: a text whose values cannot be listed (a path, a project name), checked where noted in
    `allowed`. `allowed`: what the reference shows where bounds or choices say too little (a rule
    between keys, a device list); a callable is asked when shown. `fix`: the fix an out-of-range value
    gets instead of the generic one. `example`: a value to show in messages where the default (null)
    shows nothing. `data_parallel_only`: read only by data-parallel runs (a one-device run refuses it).
    `path`: a file or folder path, whose leading `~` the configuration expands (config/load.expand_paths).
    """

    help: str
    min: float | None = None
    max: float | None = None
    above: float | None = None
    below: float | None = None
    choices: tuple[str, ...] | None = None
    free_form: bool = False
    allowed: str | Callable[[], str] | None = None
    fix: str | None = None
    example: Any = None
    resume: str = MUST_MATCH
    data_parallel_only: bool = False
    path: bool = False

    @property
    def bounded(self) -> bool:
        return any(b is not None for b in (self.min, self.max, self.above, self.below))


def setting(default: Any, help: str, **facts: Any) -> Any:
    """A schema key: its default, its one-line meaning and the facts of `Setting` (keyword arguments).

    A list default becomes a default_factory (a fresh copy per Config)."""
    metadata = {"setting": Setting(help=help, **facts)}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: copy.deepcopy(default), metadata=metadata)
    return field(default=default, metadata=metadata)


def setting_of(f: Any) -> Setting | None:
    """The Setting of a dataclass field (None: declared without setting())."""
    return f.metadata.get("setting")


@dataclass
class NanGuardConfig:
    enabled: bool = setting(True, "reset and count (Train/nan_resets) envs whose state, observation or reward is "
                                  "not finite, or whose physics overflowed MuJoCo Warp's contact/constraint capacity")


@dataclass
class TrainingConfig:
    devices: Optional[list[Any]] = setting(
        None, "GPUs for this run (0, cuda:0, GPU-<uuid>, MIG-<id>) or [cpu]; null = cuda:0 for mjwarp when a GPU "
              "is visible, else the CPU; more than one = data parallel",
        allowed=DEVICES_ALLOWED, example=["cpu"], resume=MAY_DIFFER)  # the world size must match (resume.py)
    num_envs: int = setting(64, "environments per rank", min=1)
    eval_envs: int = setting(
        0, "the last N envs of each rank act deterministically (tanh(mean), no noise) and are logged apart as "
           "Eval/*; their transitions still go to replay", min=0, allowed="0 .. training.num_envs - 1")
    seed: int = setting(1, "base seed; learner, env, exploration and replay streams (and ranks) derive from it",
                        min=0, max=2**32 - 1)  # numpy's seed range
    log_dir: Optional[str] = setting(None, "run directory (must not exist yet); null = runs/<task>-<algo>-<timestamp>",
                                    free_form=True, path=True, allowed="null or a path", resume=MAY_DIFFER)
    env_steps_per_sync: int = setting(1, "collector ticks per learner iteration (training semantics)", min=1)
    cuda_process_sharing: Optional[str] = setting(
        None, "run the duo under a CUDA MPS daemon (fails closed; docs/mps.md)", choices=("mps",))
    data_parallel: Optional[bool] = setting(
        None, "data parallel: null = on when training.devices lists several entries or under torchrun; true = also "
              "one device (world size 1 through the launcher); false = never", resume=MAY_DIFFER)
    dp_gradient_wire_dtype: str = setting(
        "float32", "data parallel: the gradient all-reduce's dtype; bfloat16 sends fp32 groups of >= 1024 elements as "
                   "bf16, restored to fp32 before the division by the world size", choices=WIRE_DTYPES,
        resume=MAY_DIFFER, data_parallel_only=True)
    dp_timeout_s: float = setting(300.0, "data parallel: the longest a rank waits for the others in a collective of "
                                         "the training loop (s)", above=0,
                                  resume=MAY_DIFFER, data_parallel_only=True)
    dp_startup_timeout_s: float = setting(1800.0, "data parallel: the same for start-up and checkpoints (building "
                                                  "envs, compiling, capturing, writing) (s)",
                                          above=0, resume=MAY_DIFFER, data_parallel_only=True)
    no_play: bool = setting(True, "skip the post-train play (8 deterministic episodes)", resume=MAY_DIFFER)
    export_onnx: bool = setting(False, "export the policy to export/policy.onnx and export/policy.safetensors at the end",
                                resume=MAY_DIFFER)
    nan_guard: NanGuardConfig = field(default_factory=NanGuardConfig)
    resume: Optional[str] = setting(
        None, "continue from a run directory (its latest checkpoint) or a checkpoint file, into a new run directory",
        free_form=True, path=True, allowed="null or a path", resume=MAY_DIFFER)
    checkpoint_replay: bool = setting(False, "also store the replay ring in checkpoints (bitwise-exact resume)",
                                     resume=MAY_DIFFER)
    log_interval: int = setting(1, "iterations per metrics row and progress update", min=1, resume=MAY_DIFFER)
    progress: bool = setting(True, "show the live progress line", resume=MAY_DIFFER)
    torch_threads: int = setting(0, "torch CPU threads per process, learner and collector each (0 = torch's default)",
                                min=0, resume=MAY_DIFFER)
    max_wall_minutes: Optional[float] = setting(
        None, "stop at the first iteration boundary after this many minutes (build and compile included), with a "
              "final checkpoint, as a completed run; null = run algo.max_iterations", above=0, example=15,
        resume=MAY_DIFFER)
    wandb: bool = setting(False, "also log metrics to Weights & Biases (needs `pip install duorl[wandb]`; rank 0 only)",
                          resume=MAY_DIFFER)
    wandb_project: str = setting("duorl", "the Weights & Biases project (with training.wandb=true)",
                                 free_form=True, allowed="a Weights & Biases project name", resume=MAY_DIFFER)
    # offline needs no network or account: the run lands in RUN_DIR/wandb/ and `wandb sync` uploads it later
    wandb_mode: str = setting("online", "online (needs `wandb login`) or offline (RUN_DIR/wandb/, upload later "
                                        "with `wandb sync`)", choices=WANDB_MODES,
                                resume=MAY_DIFFER)
    stall_timeout_s: float = setting(
        120.0, "liveness (docs/exit_codes.md): a duo process whose heartbeat is older than this in a steady-state "
               "phase ends the run, named with its phase and last progress; never below 50x its longest "
               "steady phase measured so far (s)", above=0, resume=MAY_DIFFER)
    stall_compile_timeout_s: float = setting(
        900.0, "the same for the long phases: starting a process, building envs, compiling, capturing CUDA graphs, "
               "writing checkpoints, waiting for other ranks (s; >= training.stall_timeout_s)", above=0,
        allowed="> 0 and >= training.stall_timeout_s", resume=MAY_DIFFER)
    wait_report_s: float = setting(30.0, "a wait for the other process of the duo says what it awaits after this "
                                         "many seconds, and again at this interval", above=0,
                                  resume=MAY_DIFFER)


@dataclass
class AlgoParamsConfig:
    whole_cycle_cuda_graph: Optional[bool] = setting(
        None, "each learner iteration as one CUDA graph: null = on when the learner runs on CUDA (off with "
              "debug.check_replay_window), true = required, false = eager")
    dp_whole_cycle_cuda_graph: bool = setting(True, "the same under data parallel", data_parallel_only=True)
    torch_compile: Optional[bool] = setting(
        None, "torch.compile the learner's networks (CUDA only; the first iteration compiles): null = on with "
              "CUDA, true = required (a CUDA learner), false = off")
    # the learner-speed levers of issue #41, measured on the H200 (benchmarks/2026-12-03_learner_round6_h200/):
    # gradients_by_copy and packed_replay gain 2-7% and train bitwise like before, so they are on; the Triton
    # kernels (layer_norm_silu=fused*, batchnorm_stats_kernel) measured slower or no faster, so they are off.
    # They change how the same update is computed (kernels, rounding, memory layout), not what is learned,
    # so a resumed run may switch them (and a checkpoint from before they existed resumes)
    layer_norm_silu: str = setting(
        "compile", "sac on CUDA: how each Linear -> LayerNorm -> SiLU block normalises: compile (torch.compile's "
                   "kernels), fused (LayerNorm + SiLU as one Triton kernel forward and one backward, bf16 "
                   "activations under autocast; needs Triton), fused_bias (also the linear map's bias, added in "
                   "that kernel instead of the product)", choices=LAYER_NORM_SILU, resume=MAY_DIFFER)
    gradients_by_copy: bool = setting(
        True, "backward returns each optimizer group's gradients and one multi-tensor copy writes them into the "
               "gradient buffers (no zeroing and no accumulate per parameter)", resume=MAY_DIFFER)
    packed_replay: bool = setting(
        True, "the replay ring keeps the seven sampled fields side by side in one tensor: a minibatch is one "
               "gather instead of seven", resume=MAY_DIFFER)
    batchnorm_stats_kernel: bool = setting(
        False, "flashsac on CUDA: BatchNorm batch statistics that need no gradient (each network's input norm, "
               "every norm of the target critic) by a two-stage Triton column reduction; needs Triton",
        resume=MAY_DIFFER)


@dataclass
class AlgoConfig:
    name: str = setting("sac", "the learner; chosen by --algo", choices=ALGOS,
                        fix="pick one with --algo, e.g. --algo sac")
    max_iterations: int = setting(1000, "learner iterations", min=1, resume=MAY_DIFFER)
    save_interval: int = setting(500, "iterations between checkpoints (a final one is always written)", min=1,
                                resume=MAY_DIFFER)
    batch_size: int = setting(8192, "minibatch per update", min=1)
    updates_per_step: int = setting(8, "gradient updates per learner iteration",
                                    min=1)  # 0 would "complete" a run that never learned
    policy_frequency: int = setting(4, "actor and temperature update every N critic updates", min=1)
    learning_starts: int = setting(10, "collector ticks in replay before the first update (each adds num_envs "
                                       "transitions)", min=0)
    buffer_size: int = setting(1024, "replay capacity in ticks per env (the ring holds buffer_size * num_envs "
                                     "transitions)", min=1,
                          allowed=">= 2 * training.env_steps_per_sync, and buffer_size * training.num_envs >= "
                                  "algo.batch_size (one minibatch fits in the ring)")
    # gamma = 1 makes the bootstrapped return unbounded at time-limit truncations
    gamma: float = setting(0.97, "discount", above=0, below=1,
                           fix="set algo.gamma=0.99 (or 0.97 for short-horizon locomotion)")
    tau: float = setting(0.125, "Polyak rate of the target critics", above=0, max=1,
                         fix="set algo.tau=0.005 .. 0.125 (1 copies the critic)")
    actor_lr: float = setting(3e-4, "actor AdamW learning rate", above=0)
    critic_lr: float = setting(3e-4, "critic AdamW learning rate", above=0)
    alpha_lr: float = setting(3e-4, "temperature AdamW learning rate", above=0)
    weight_decay: float = setting(0.001, "AdamW weight decay (not on the temperature)", min=0)
    alpha_init: float = setting(0.001, "initial temperature", above=0)  # learned as log(alpha)
    target_entropy_scale: float = setting(
        -0.0, "target entropy = scale * action_dim (sac; the usual -|A| is -1.0)", free_form=True,
        allowed="any finite number")
    num_atoms: int = setting(101, "atoms of the C51 support of the distributional critics", min=2)
    v_min: float = setting(-20.0, "lower end of the critic support", free_form=True,
                           allowed="finite, < algo.v_max")
    v_max: float = setting(20.0, "upper end of the critic support", free_form=True, allowed="finite, > algo.v_min")
    actor_hidden_dims: list[int] = setting([512, 256, 128], "sac: actor MLP widths (LayerNorm + SiLU)", min=1,
                                           example=[256, 256])
    critic_hidden_dims: list[int] = setting([768, 384, 192], "sac: critic MLP widths (LayerNorm + SiLU)", min=1,
                                            example=[256, 256])
    log_std_min: float = setting(-5.0, "lower bound of the actor's log-std", free_form=True,
                                 allowed="finite, < algo.log_std_max")
    log_std_max: float = setting(0.0, "upper bound of the actor's log-std", free_form=True,
                                 allowed="finite, > algo.log_std_min")
    max_grad_norm: float = setting(0.0, "gradient clipping norm (0 = off)", min=0)
    obs_normalization: bool = setting(True, "running observation normalisers (folded into the published actor)")
    use_symmetry: bool = setting(
        False, "add each sampled batch's left-right mirror image (2 x batch_size per update); the task must "
               "describe its mirror (`duorl tasks` shows which do)")
    use_autocast: bool = setting(True, "bf16 autocast of forward passes on CUDA (ignored on the CPU)")
    # --- FlashSAC / WarpSAC only (sac ignores these) ---
    actor_hidden_dim: int = setting(128, "flashsac/warpsac: actor trunk width", min=1)
    actor_num_blocks: int = setting(2, "flashsac/warpsac: actor inverted-residual blocks", min=0)
    critic_hidden_dim: int = setting(256, "flashsac/warpsac: critic trunk width", min=1)
    critic_num_blocks: int = setting(2, "flashsac/warpsac: critic inverted-residual blocks", min=0)
    block_expansion: int = setting(4, "flashsac/warpsac: expansion factor of the inverted-residual blocks",
                                  min=1)
    normalize_reward: bool = setting(
        True, "flashsac/warpsac: divide rewards by the running scale of the discounted return")
    # set v_min/v_max to +-normalized_return_max (flashsac.yaml does)
    normalized_return_max: float = setting(5.0, "flashsac/warpsac: bound of the normalised return",
                                           above=0)
    target_entropy_std: float = setting(
        0.15, "flashsac/warpsac: temperature target = entropy of a Gaussian with this std per action dim", above=0)
    noise_zeta_mu: float = setting(2.0, "flashsac/warpsac: exploration noise held for n ~ Zeta(mu) steps "
                                        "(0 = uniform on [1, noise_zeta_max])", min=0)
    noise_zeta_max: int = setting(16, "flashsac/warpsac: longest hold of the exploration noise, in steps",
                                  min=1)
    lr_warmup_updates: int = setting(0, "flashsac/warpsac: linear learning-rate warm-up, in updates",
                                     min=0)
    lr_decay_updates: int = setting(0, "flashsac/warpsac: cosine decay length in updates (0 = max_iterations * "
                                       "updates_per_step)", min=0)
    lr_end_ratio: float = setting(0.5, "flashsac/warpsac: learning rate at the end of the decay, times the rate",
                                 min=0)
    # --- replay sampling (any algo; WarpSAC turns it on) ---
    decay_step: int = setting(
        0, "age-biased replay: a tick of age a weighs max(replay_min_weight, 1 - a/decay_step); 0 = uniform", min=0)
    replay_min_weight: float = setting(0.1, "age-biased replay: the oldest ticks' weight",
                                      above=0, max=1)  # > 0: every readable tick stays reachable; the newest weighs 1
    replay_num_buckets: int = setting(2000, "age-biased replay: at most this many buckets of ticks over the window",
                                     min=1)
    algo_params: AlgoParamsConfig = field(default_factory=AlgoParamsConfig)


@dataclass
class TaskConfig:
    """The keys every task reads. A task declares its own keys in a dataclass that extends this one (the
    task layer: envs/tasks/keys.py, envs/mjlab/keys.py, or a package's factory's `config_class`;
    docs/tasks.md); a run's Config holds that dataclass, so a key its task does not declare is refused."""

    # the entry layer resolves the name to its task (envs/task_sources.py) before the configuration loads
    name: str = setting("", "the task; chosen by --task", free_form=True,
                        allowed="a task name (`duorl tasks` lists them; docs/tasks.md)")
    max_episode_steps: Optional[int] = setting(
        None, "episode length in control steps (time-limit truncation); null = the task's own", min=1, example=1000,
        fix="remove the key or set task.max_episode_steps=1000")


@dataclass
class SimConfig:
    name: str = setting("mujoco", "the physics backend; chosen by --sim (default: mjwarp with a GPU, else mujoco)",
                        choices=SIMS, fix="pick one with --sim, e.g. --sim mujoco")
    nthread: int = setting(0, "CPU threads of the mujoco backend (0 = all cores)", min=0, resume=MAY_DIFFER)
    tick_cuda_graph: Optional[bool] = setting(
        None, "each collector tick (policy, noise, physics, rewards, resets, replay write) as one CUDA graph: "
              "null = on when the envs run on CUDA, true = required, false = eager ticks",
        resume=MAY_DIFFER)  # a captured tick launches the same kernels as an eager one
    tick_compile: Optional[bool] = setting(
        None, "torch.compile an env step's tensor code (observations, rewards, terminations, resets): null = on "
              "with the tick graph, true = on (CUDA envs), false = off",
        resume=MAY_DIFFER)  # fused kernels compute the same step (to float rounding) from the same state
    # Same worlds, same result. Off by default: among thousands of worlds one almost always needs every
    # iteration, so the early exit gains nothing measurable (docs/benchmarks.md).
    solver_early_exit: bool = setting(
        False, "MuJoCo Warp's solver stops once every world has converged (a conditional node of the tick "
               "graph; needs it) instead of running its fixed opt.iterations",
        resume=MAY_DIFFER)  # skips only solver iterations in which every world has converged
    mjlab_staged_step: Optional[bool] = setting(
        None, "mjlab tasks: step mjlab's env in stages, its host-sync-free stretches (actions, physics, "
              "terminations, rewards, commands, observations) each replayed as a CUDA graph and only the "
              "host-reading parts (interval events, command resampling, resets of done envs) eager: null = on "
              "when the envs run on CUDA, true = on (the CPU runs the same stages eagerly), false = mjlab's "
              "own env.step",
        resume=MAY_DIFFER)  # the same ops in the same order, from the same random streams
    mjlab_reset_graphs: Optional[bool] = setting(
        None, "mjlab tasks with the staged step on CUDA: the reset of the done envs (all of mjlab's _reset_idx "
              "but its curriculum) as a CUDA graph per number of done envs, the last 64 counts kept: null = "
              "off (few counts came back in a 40-tick profile at 4096 envs), true = on, false = off",
        resume=MAY_DIFFER)  # the same reset ops from the same random streams, replayed instead of launched


@dataclass
class DebugConfig:
    """Test hooks: artificial delays and protocol self-checks. Never needed for training."""

    collector_delay_ms: float = setting(0.0, "artificial delay per collector iteration (protocol tests)",
                                        min=0, resume=MAY_DIFFER)
    learner_delay_ms: float = setting(0.0, "artificial delay per learner iteration (protocol tests)",
                                      min=0, resume=MAY_DIFFER)
    learner_build_delay_ms: float = setting(0.0, "artificial delay in the learner's build (start-up tests: what "
                                                 "the collector builds meanwhile)", min=0, resume=MAY_DIFFER)
    fail_env_build: bool = setting(False, "make the collector's env build fail (start-up tests: an env error while "
                                          "the learner builds)", resume=MAY_DIFFER)
    check_replay_window: bool = setting(
        False, "check every sampled row's tick stamp against the readable window (host sync; tests)",
        resume=MAY_DIFFER)
    nan_inject_step: int = setting(
        -1, "make env 0's state NaN before this collector env step (0-based; -1 = never): the NaN guard end to end",
        min=-1, resume=MAY_DIFFER)
    nan_loss_iteration: int = setting(
        -1, "make the first update of this learner iteration invalid (a NaN added to its losses) on rank "
            "debug.nan_loss_rank (-1 = never): the skip of invalid updates end to end", min=-1, resume=MAY_DIFFER)
    nan_loss_rank: int = setting(0, "the rank whose losses debug.nan_loss_iteration poisons", min=0,
                                 resume=MAY_DIFFER)
    fail_capture_rank: int = setting(-1, "make this rank's whole-cycle graph capture fail (-1 = never): a capture "
                                         "error reaching every rank", min=-1, resume=MAY_DIFFER)
    slow_phase: Optional[str] = setting(
        None, "fault tests: each time this process enters this phase it stays there debug.slow_phase_s longer, "
              "alive, so that a test can signal it there (runtime/heartbeat.py PHASES)", free_form=True,
        allowed="null, learner:<phase>, collector:<phase> (checked by cli/preflight.py, which knows the phases)",
        resume=MAY_DIFFER)
    slow_phase_s: float = setting(0.0, "how long debug.slow_phase holds its phase open (s)", min=0,
                                      resume=MAY_DIFFER)


@dataclass
class Config:
    training: TrainingConfig = field(default_factory=TrainingConfig)
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    task: TaskConfig = field(default_factory=TaskConfig)
    sim: SimConfig = field(default_factory=SimConfig)
    debug: DebugConfig = field(default_factory=DebugConfig)
