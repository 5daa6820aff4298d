"""What the SAC-family learners (sac, flashsac/warpsac) share verbatim: the optimizer reload that keeps
device learning-rate tensors, and the small learner helpers below (the tanh-Gaussian head and its
squash: algos/tanh_gaussian.py)."""

from __future__ import annotations

import contextlib
import copy
import math
from typing import Any, Callable, Iterator

import torch
from torch import nn

from duorl.algos.base import Batch, GradientSynchronizer, Learner, NullSynchronizer
from duorl.algos.capture import CycleCaptureMixin
from duorl.config.switches import compile_enabled
from duorl.gpu import torch_internals
from duorl.gpu.compiling import maybe_compile
from duorl.algos.sac.normalizer import RunningObsNormalizer
from duorl.algos.tanh_gaussian import squash
from duorl.config.seeding import derive_seed

# what an iteration reports from its latest actor update (and repeats when it made none)
ACTOR_METRICS = ("Loss/actor", "Loss/alpha", "Policy/entropy")


def step_unless_invalid(optimizer: torch.optim.Optimizer, verdict: torch.Tensor | None) -> None:
    """optimizer.step(), skipped on the device when `verdict` is 0: the learners' AdamW is fused, whose
    `found_inf` input leaves parameters, moments and step counts bitwise as they were (no host sync)."""
    if verdict is not None:
        torch_internals.set_found_inf(optimizer, 1.0 - verdict)
    optimizer.step()


def load_optimizer(optimizer: torch.optim.Optimizer, state: dict) -> None:
    """Optimizer.load_state_dict swaps in the saved lr object (a CPU tensor after
    torch.load(map_location="cpu")); keep our device lr tensors and copy the values into them."""
    lrs = [group["lr"] for group in optimizer.param_groups]
    optimizer.load_state_dict(state)
    for group, lr in zip(optimizer.param_groups, lrs):
        lr.copy_(group["lr"])
        group["lr"] = lr


def _mirror_tensors(cfg: Any, spec: Any, device: torch.device) -> dict[str, tuple[torch.Tensor, torch.Tensor]] | None:
    """The task's mirror (EnvSpec.mirror) as device (index, sign) pairs when algo.use_symmetry is on."""
    if not cfg.use_symmetry:
        return None
    from duorl.envs.task_sources import check_symmetry  # the rule train's preflight applies first

    check_symmetry(spec, True)
    mirror = spec.mirror
    return {key: (torch.tensor(getattr(mirror, key)[0], dtype=torch.long, device=device),
                  torch.tensor(getattr(mirror, key)[1], dtype=torch.float32, device=device))
            for key in ("actor_obs", "critic_obs", "action")}


class SACFamilyLearner(CycleCaptureMixin, Learner):
    """Helpers over the attributes every SAC-family learner has: actor (with obs_norm), critic,
    critic_obs_norm, the three optimizers, and the flat target/online critic parameter lists."""

    # state_dict entries computed from this rank's own batches (reported metrics, not training state):
    # under data parallel they differ between ranks while everything else is bitwise equal
    rank_local_state = ("last_actor_metrics",)

    actor: Any
    critic: torch.nn.Module
    critic_obs_norm: Any
    actor_optimizer: torch.optim.Optimizer
    critic_optimizer: torch.optim.Optimizer
    alpha_optimizer: torch.optim.Optimizer
    _target_params: list[torch.Tensor]
    _critic_params: list[torch.Tensor]

    # ------------------------------------------------------------------ shared construction

    def _build_models(self, cfg: Any, spec: Any, device: torch.device | str, seed: int,
                      build_actor: Callable[[Any, Any], nn.Module], build_critic: Callable[[Any, Any], nn.Module]) -> None:
        """Config checks, then actor and critic initialised on the CPU from `seed` alone (the same weights
        on every device and rank; the caller's global RNG is left as it was), their device copies, the
        frozen target critic, the critic's observation normaliser and the learned temperature."""
        self.cfg = cfg
        self.device = torch.device(device)
        if cfg.policy_frequency < 1:
            raise ValueError(f"algo.policy_frequency must be >= 1, got {cfg.policy_frequency}")
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(derive_seed(seed, "init"))
            actor = build_actor(cfg, spec)
            critic = build_critic(cfg, spec)
        self.actor = actor.to(self.device)
        self.critic = critic.to(self.device)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        # the critic's normaliser lives here, not in the critic, so Polyak/target copies never see it
        self.critic_obs_norm = (
            RunningObsNormalizer(spec.critic_obs_dim).to(self.device) if cfg.obs_normalization else None
        )
        self.log_alpha = nn.Parameter(torch.tensor(math.log(cfg.alpha_init), device=self.device))
        self._actor_params = list(self.actor.parameters())
        self._critic_params = list(self.critic.parameters())
        self._target_params = list(self.critic_target.parameters())
        self._mirror = _mirror_tensors(cfg, spec, self.device)

    def _finish_build(self, seed: int) -> None:
        """After the optimizers: gradients that exist from the start and are only ever zeroed in place
        (their addresses stay fixed for graphs), the sampling generator, the counters, and the compiled
        views of the networks (CUDA; identity on the CPU: config.switches.compile_enabled)."""
        for p in self._actor_params + self._critic_params + [self.log_alpha]:
            p.grad = torch.zeros_like(p)
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(derive_seed(seed, "learner_sampling"))
        self.num_updates = 0  # critic updates so far; drives the actor schedule
        self.state_generation = 0  # bumped by load_state_dict: captured CUDA graphs are stale
        # the optimizer groups a synchronizer sees, by stable name and parameter list
        self.sync_groups: dict[str, list[nn.Parameter]] = {
            "critic": self._critic_params, "actor": self._actor_params, "alpha": [self.log_alpha],
        }
        self.grad_sync: GradientSynchronizer = NullSynchronizer()
        # updates whose critic step a verdict skipped (Train/skipped_updates), counted on the device
        self.skipped_updates = torch.zeros((), device=self.device)
        # debug: per update of an iteration, a value added to every loss (NaN to inject an invalid
        # update, DuoSettings.nan_loss_iteration); None = losses are used as computed
        self.loss_poison: torch.Tensor | None = None
        self._update_index = 0
        # actor-side metrics of the latest actor update, reported by calls that have none
        self._last_actor_metrics = {k: torch.zeros((), device=self.device) for k in ACTOR_METRICS}
        self.compiled = compile_enabled(self.cfg, self.device)
        self._critic_fn = maybe_compile(self.critic, self.compiled)
        self._target_fn = maybe_compile(self.critic_target, self.compiled)
        self._actor_dist = maybe_compile(self.actor.distribution_params, self.compiled)
        self._squash = maybe_compile(squash, self.compiled)

    def _adamw(self, params: list[nn.Parameter], lr: float, weight_decay: float,
               betas: tuple[float, float] = (0.9, 0.999)) -> torch.optim.AdamW:
        """AdamW with its learning rate as a device tensor (a schedule can fill_() it without recapturing a
        graph), fused on every device: one kernel per step and an on-device skip through `found_inf`
        (step_unless_invalid); capturable on CUDA (step counters on the device, allowed in a capture)."""
        return torch.optim.AdamW(params, lr=torch.tensor(lr, device=self.device), betas=betas,
                                 weight_decay=weight_decay, fused=True, capturable=self.device.type == "cuda")

    def set_synchronizer(self, sync: GradientSynchronizer) -> None:
        """Hand every optimizer group and running-statistics buffer to `sync` (data parallel); before
        the first update."""
        sync.attach(self.sync_groups, self.running_buffers())
        self.grad_sync = sync

    def running_buffers(self) -> list[torch.Tensor]:
        """Buffers the networks' forward passes update from the batch (BatchNorm's running_mean and
        running_var; none in FastSAC's networks)."""
        out: list[torch.Tensor] = []
        for module in (self.actor, self.critic, self.critic_target):
            out += [b for name, b in module.named_buffers() if name.rsplit(".", 1)[-1].startswith("running_")]
        return out

    # ------------------------------------------------------------------ checkpoints

    def state_dict(self) -> dict:
        """Everything needed for a bitwise-identical continuation (tensors alias live state)."""
        state = {
            "actor": self.actor.state_dict(),
            "critic": self.critic.state_dict(),
            "critic_target": self.critic_target.state_dict(),
            "critic_obs_norm": self.critic_obs_norm.state_dict() if self.critic_obs_norm is not None else None,
            "log_alpha": self.log_alpha.detach(),
            "actor_optimizer": self.actor_optimizer.state_dict(),
            "critic_optimizer": self.critic_optimizer.state_dict(),
            "alpha_optimizer": self.alpha_optimizer.state_dict(),
            "num_updates": self.num_updates,
            "generator": self.generator.get_state(),
            "last_actor_metrics": dict(self._last_actor_metrics),
            "skipped_updates": self.skipped_updates,
        }
        state.update(self._extra_state())
        return state

    def load_state_dict(self, state: dict) -> None:
        """Restore in place (parameter, buffer and gradient addresses kept); captured graphs go stale."""
        self.actor.load_state_dict(state["actor"])
        self.critic.load_state_dict(state["critic"])
        self.critic_target.load_state_dict(state["critic_target"])
        if self.critic_obs_norm is not None:
            self.critic_obs_norm.load_state_dict(state["critic_obs_norm"])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        for opt, key in zip(self.graph_optimizers(), ("actor_optimizer", "critic_optimizer", "alpha_optimizer")):
            load_optimizer(opt, state[key])
        self.num_updates = int(state["num_updates"])
        self.generator.set_state(state["generator"].cpu())
        for k in ACTOR_METRICS:
            self._last_actor_metrics[k].copy_(state["last_actor_metrics"][k])
        self.skipped_updates.copy_(state.get("skipped_updates", torch.zeros(())))  # absent before it existed
        self._load_extra_state(state)
        self.state_generation += 1

    def _extra_state(self) -> dict:
        """A learner's own entries of state_dict (none here)."""
        return {}

    def _load_extra_state(self, state: dict) -> None:
        return None

    # ------------------------------------------------------------------ shared helpers

    def _augmented(self, batch: Batch) -> Batch:
        """algo.use_symmetry: the batch followed by its left-right mirror image (rewards and ends
        repeated; the task's rewards are mirror-invariant). Without it, the batch itself."""
        if self._mirror is None:
            return batch
        m = self._mirror

        def both(x: torch.Tensor, key: str) -> torch.Tensor:
            index, sign = m[key]
            return torch.cat((x, x.index_select(1, index) * sign))

        return Batch(
            obs_actor=both(batch.obs_actor, "actor_obs"),
            obs_critic=both(batch.obs_critic, "critic_obs"),
            action=both(batch.action, "action"),
            reward=batch.reward.repeat(2),
            next_obs_actor=both(batch.next_obs_actor, "actor_obs"),
            next_obs_critic=both(batch.next_obs_critic, "critic_obs"),
            terminated=batch.terminated.repeat(2),
        )

    def _optimizer_step(
        self, optimizer: torch.optim.Optimizer, group: str, loss: torch.Tensor, clip: bool = True
    ) -> torch.Tensor | None:
        """Backward, the synchronizer, clip and step of one optimizer group; returns the verdict."""
        if self.loss_poison is not None:
            loss = loss + self.loss_poison[self._update_index]
        params = self.sync_groups[group]
        if self.cfg.algo_params.gradients_by_copy:
            # one multi-tensor copy into the gradient buffers instead of zeroing them and accumulating into
            # them parameter by parameter (a kernel each); unused parameters get zeros
            grads = torch.autograd.grad(loss, params, allow_unused=True, materialize_grads=True)
            torch_internals.foreach_copy_([p.grad for p in params], grads)
        else:
            optimizer.zero_grad(set_to_none=False)
            loss.backward()
        verdict = self.grad_sync.synchronize(group, loss)
        if clip and self.cfg.max_grad_norm > 0:
            # clip_grad_norm_ scales by a device tensor: no host sync
            nn.utils.clip_grad_norm_(params, self.cfg.max_grad_norm)
        step_unless_invalid(optimizer, verdict)
        return verdict

    @torch.no_grad()
    def observe(self, obs_actor: torch.Tensor, obs_critic: torch.Tensor) -> None:
        gather = self._stats_gather()
        if self.actor.obs_norm is not None:
            self.actor.obs_norm.update(obs_actor, gather)
        if self.critic_obs_norm is not None:
            self.critic_obs_norm.update(obs_critic, gather)

    def _stats_gather(self) -> Callable[[torch.Tensor], torch.Tensor] | None:
        """The synchronizer's gather when there are peers (None: merge the local batch as it is)."""
        return self.grad_sync.gather if self.grad_sync.world_size > 1 else None

    def graph_optimizers(self) -> list[torch.optim.Optimizer]:
        return [self.actor_optimizer, self.critic_optimizer, self.alpha_optimizer]

    @contextlib.contextmanager
    def _critic_frozen(self) -> Iterator[None]:
        # the actor loss backpropagates through the critic to the action only; freezing the critic's
        # parameters skips their weight gradients (and leaves the critic's .grad untouched)
        self.critic.requires_grad_(False)
        try:
            yield
        finally:
            self.critic.requires_grad_(True)

    def _normalize_critic_obs(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic_obs_norm(obs) if self.critic_obs_norm is not None else obs

    @torch.no_grad()
    def _count_skip(self, verdict: torch.Tensor | None) -> None:
        """After the critic's step: its found_inf (1 - verdict, set by step_unless_invalid) is the skip."""
        if verdict is not None:
            self.skipped_updates.add_(self.critic_optimizer.found_inf)  # type: ignore[attr-defined]

    def poison_losses(self, num_updates: int) -> torch.Tensor:
        """The per-update loss offsets (zeros) a test fills with NaN to make updates invalid; a learner
        with them launches one more add per optimizer step."""
        if self.loss_poison is None or self.loss_poison.numel() < num_updates:
            self.loss_poison = torch.zeros(num_updates, device=self.device)
        return self.loss_poison

    @torch.no_grad()
    def _update_targets(self, verdict: torch.Tensor | None = None) -> None:
        """Polyak average toward the critic; skipped (weight 0: the targets stay bitwise as they were)
        with the critic's step when its verdict is 0."""
        if verdict is None:
            torch_internals.foreach_lerp_(self._target_params, self._critic_params, self.cfg.tau)
            return
        # t += (verdict * tau) * (c - t) as three multi-tensor kernels (a lerp weighted by a tensor is one
        # kernel per parameter); a weight of 0 adds exact zeros: the targets stay bitwise
        delta = torch_internals.foreach_sub(self._critic_params, self._target_params)
        torch_internals.foreach_mul_(delta, verdict * self.cfg.tau)
        torch_internals.foreach_add_(self._target_params, delta)
