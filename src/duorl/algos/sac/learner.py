"""FastSAC learner: SAC with twin C51 distributional critics, for massively parallel simulation.

One update (docs/design.md §3 runs `num_updates` of them per learner iteration):
  critic   soft distributional Bellman target from the Polyak target critics; clipped double-Q by
           picking, per sample, the projected target distribution with the smaller expected value
  actor    every `policy_frequency`-th update (counted across calls): alpha*log pi - min(Q1, Q2)
  alpha    with the actor: log_alpha toward target entropy = target_entropy_scale * action_dim
  targets  Polyak average with tau after every critic update

Graph-friendly by construction, so that gpu/graphs.py can capture a whole iteration as one CUDA graph: no
`.item()` or other host reads, no Python branch on a tensor value, fixed shapes, learning rates as
device tensors (fused AdamW, capturable on CUDA), gradients allocated once and zeroed in place, and
every random draw from one dedicated `torch.Generator` (register it with the graph). The actor
schedule follows the Python counter `num_updates`, which a capture advances once and replays do not:
capture with num_updates % policy_frequency == 0 so every replay has the same schedule, and keep the
counter in step (+num_updates per replay, minus the capture's own advance).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import torch
from torch import nn

from duorl.algos.base import Batch, SampleFn
from duorl.gpu.compiling import maybe_compile
from duorl.gpu.triton_support import kernels_run_on
from duorl.algos.sac_family import ACTOR_METRICS, SACFamilyLearner
from duorl.algos.sac.categorical import categorical_projection, soft_target_atoms
from duorl.algos.sac.networks import CategoricalCriticEnsemble, TanhGaussianActor, fuse_layer_norm_silu
from duorl.algos.tanh_gaussian import squash

if TYPE_CHECKING:  # envs/ may grow heavy imports (warp, mujoco); only the type is needed here
    from duorl.config.schema import AlgoConfig
    from duorl.envs.base import EnvSpec

# FastSAC's Adam betas: a shorter second-moment memory than the default 0.999 follows the fast-moving
# critic targets of high update-to-data training.
ADAM_BETAS = (0.9, 0.95)
METRIC_KEYS = ("Loss/critic", "Loss/actor", "Loss/alpha", "Policy/alpha", "Policy/entropy", "Policy/q_mean",
               "Train/skipped_updates")
_ACTOR_METRICS = ACTOR_METRICS


def build_actor(cfg: AlgoConfig, spec: EnvSpec) -> TanhGaussianActor:
    """The actor architecture shared by the learner and the collector (weights on CPU, fp32)."""
    return TanhGaussianActor(
        obs_dim=spec.actor_obs_dim,
        action_dim=spec.action_dim,
        hidden_dims=list(cfg.actor_hidden_dims),
        log_std_min=cfg.log_std_min,
        log_std_max=cfg.log_std_max,
        obs_normalization=cfg.obs_normalization,
    )


def build_critic(cfg: AlgoConfig, spec: EnvSpec) -> CategoricalCriticEnsemble:
    return CategoricalCriticEnsemble(
        obs_dim=spec.critic_obs_dim,
        action_dim=spec.action_dim,
        hidden_dims=list(cfg.critic_hidden_dims),
        num_atoms=cfg.num_atoms,
        v_min=cfg.v_min,
        v_max=cfg.v_max,
        num_members=2,
    )


class SACLearner(SACFamilyLearner):
    """FastSAC learner implementing `duorl.algos.base.Learner` and `duorl.gpu.graphs.GraphCapturable`."""

    def __init__(self, cfg: AlgoConfig, spec: EnvSpec, device: torch.device | str, seed: int) -> None:
        self._build_models(cfg, spec, device, seed, build_actor, build_critic)
        self.actor: TanhGaussianActor
        if cfg.algo_params.layer_norm_silu != "compile" and kernels_run_on(self.device):
            # the learner's own kernels: the collector's actor (built apart) keeps the plain modules
            for module in (self.actor, self.critic, self.critic_target):
                fuse_layer_norm_silu(module, fold_bias=cfg.algo_params.layer_norm_silu == "fused_bias")
        self.target_entropy = float(cfg.target_entropy_scale) * spec.action_dim
        self.spec_action_dim = spec.action_dim
        self.actor_optimizer = self._adamw(self._actor_params, cfg.actor_lr, cfg.weight_decay, ADAM_BETAS)
        self.critic_optimizer = self._adamw(self._critic_params, cfg.critic_lr, cfg.weight_decay, ADAM_BETAS)
        # no weight decay on log_alpha: decoupled decay would drag alpha toward 1 regardless of entropy
        self.alpha_optimizer = self._adamw([self.log_alpha], cfg.alpha_lr, 0.0, ADAM_BETAS)
        self._finish_build(seed)
        # each update is three compiled pieces around the optimizer steps (CUDA): the batch (mirror and
        # critic normalisation), the critic's target and loss, and the actor's loss
        self._prepare = maybe_compile(self._prepare_eager, self.compiled)
        self._critic_target = maybe_compile(self._critic_target_eager, self.compiled)
        self._critic_loss = maybe_compile(self._critic_loss_eager, self.compiled)
        self._actor_loss = maybe_compile(self._actor_loss_eager, self.compiled)

    # ------------------------------------------------------------------ construction helpers

    def _autocast(self) -> contextlib.AbstractContextManager:
        if self.cfg.use_autocast and self.device.type == "cuda":
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    # ------------------------------------------------------------------ graph support

    def graph_modules(self) -> list[nn.Module]:
        mods: list[nn.Module] = [self.actor, self.critic, self.critic_target]
        if self.critic_obs_norm is not None:
            mods.append(self.critic_obs_norm)
        return mods

    # ------------------------------------------------------------------ Learner protocol

    def train_iteration(self, sample: SampleFn, num_updates: int) -> dict[str, torch.Tensor]:
        critic_loss_sum = torch.zeros((), device=self.device)
        q_mean_sum = torch.zeros((), device=self.device)
        actor_sums = {k: torch.zeros((), device=self.device) for k in _ACTOR_METRICS}
        actor_updates = 0
        for u in range(num_updates):
            self._update_index = u
            batch = Batch(*self._prepare(sample(self.cfg.batch_size)))
            critic_loss, q_mean, critic_ok = self._update_critic(batch)
            critic_loss_sum += critic_loss
            q_mean_sum += q_mean
            if self._actor_due():
                for k, v in zip(_ACTOR_METRICS, self._update_actor_and_alpha(batch)):
                    actor_sums[k] += v
                actor_updates += 1
            self._update_targets(critic_ok)
            self.num_updates += 1

        self.grad_sync.average_buffers()
        if actor_updates:
            for k in _ACTOR_METRICS:
                self._last_actor_metrics[k].copy_(actor_sums[k] / actor_updates)
        metrics = {k: v.clone() for k, v in self._last_actor_metrics.items()}
        metrics["Loss/critic"] = critic_loss_sum / max(num_updates, 1)
        metrics["Policy/q_mean"] = q_mean_sum / max(num_updates, 1)
        metrics["Policy/alpha"] = self.log_alpha.detach().exp()
        metrics["Train/skipped_updates"] = self.skipped_updates.clone()
        return {k: metrics[k] for k in METRIC_KEYS}

    # ------------------------------------------------------------------ one update

    def _actor_due(self) -> bool:
        # actor after every policy_frequency-th critic update (the critic leads, as in TD3/FastTD3)
        return (self.num_updates + 1) % self.cfg.policy_frequency == 0

    def _noise(self, rows: int) -> torch.Tensor:
        """The reparameterisation noise of `rows` actions, from self.generator (eager: graphs register it)."""
        return torch.randn((rows, self.spec_action_dim), generator=self.generator, device=self.device)

    def _prepare_eager(self, batch: Batch) -> tuple[torch.Tensor, ...]:
        """The sampled batch as the update uses it, as Batch's fields: with its mirror image
        (algo.use_symmetry) and the critic's observations normalised (the actor normalises its own)."""
        b = self._augmented(batch)
        return (b.obs_actor, self._normalize_critic_obs(b.obs_critic), b.action, b.reward, b.next_obs_actor,
                self._normalize_critic_obs(b.next_obs_critic), b.terminated)

    def _update_critic(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        noise = self._noise(batch.next_obs_actor.shape[0])
        target = self._critic_target(batch.next_obs_actor, batch.next_obs_critic, noise, batch.reward, batch.terminated)
        loss, q_mean = self._critic_loss(batch.obs_critic, batch.action, target)
        critic_ok = self._optimizer_step(self.critic_optimizer, "critic", loss)
        self._count_skip(critic_ok)
        return loss.detach(), q_mean, critic_ok

    @torch.no_grad()
    def _critic_target_eager(self, next_obs_actor: torch.Tensor, next_obs_critic: torch.Tensor, noise: torch.Tensor,
                             reward: torch.Tensor, terminated: torch.Tensor) -> torch.Tensor:
        """The distributional soft Bellman target [B, K] from the next action the actor samples with
        `noise` (compiled on CUDA into a few fused kernels: the projection is dozens of small ops on
        [2, B, K] tensors)."""
        with self._autocast():
            next_action, next_log_prob = squash(*self.actor.distribution_params(next_obs_actor), noise)
            target_logits = self.critic_target(next_obs_critic, next_action)
        alpha = self.log_alpha.exp()
        atoms = soft_target_atoms(self.critic.support, reward, self.cfg.gamma * (1.0 - terminated), alpha * next_log_prob)
        projected = categorical_projection(target_logits.float().softmax(-1), atoms, self.cfg.v_min, self.cfg.v_max)
        # Clipped double-Q for distributions: per sample, keep the whole projected distribution of
        # the member with the smaller mean (FastTD3's CDQ). Choosing (not averaging) keeps a valid
        # distribution that is pessimistic in expectation; a mixture would only halve the bias.
        target_value = self.critic.expected_value(projected)
        return torch.where((target_value[0] <= target_value[1]).unsqueeze(-1), projected[0], projected[1])

    def _critic_loss_eager(self, obs_critic: torch.Tensor, action: torch.Tensor,
                           target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(cross-entropy of both members to the shared target, mean Q): forward and backward compiled
        together on CUDA."""
        with self._autocast():
            logits = self.critic(obs_critic, action)
        log_probs = logits.float().log_softmax(-1)
        # cross-entropy to the shared target, averaged over the batch and summed over members
        loss = -(target * log_probs).sum(-1).mean(-1).sum()
        q_mean = self.critic.expected_value(log_probs.detach().exp()).mean()
        return loss, q_mean

    def _actor_loss_eager(self, obs_actor: torch.Tensor, obs_critic: torch.Tensor,
                          noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(alpha * log pi - min(Q1, Q2), log pi) of actions the actor samples with `noise` (compiled on
        CUDA, forward and backward)."""
        with self._autocast():
            action, log_prob = squash(*self.actor.distribution_params(obs_actor), noise)
            logits = self.critic(obs_critic, action)
        q = self.critic.expected_value(logits.float().softmax(-1))  # [2, B]
        alpha = self.log_alpha.detach().exp()
        return (alpha * log_prob - torch.minimum(q[0], q[1])).mean(), log_prob

    def _update_actor_and_alpha(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        with self._critic_frozen():
            actor_loss, log_prob = self._actor_loss(batch.obs_actor, batch.obs_critic, self._noise(batch.obs_actor.shape[0]))
            self._optimizer_step(self.actor_optimizer, "actor", actor_loss)

        log_prob = log_prob.detach()
        alpha_loss = -(self.log_alpha.exp() * (log_prob + self.target_entropy)).mean()
        self._optimizer_step(self.alpha_optimizer, "alpha", alpha_loss, clip=False)
        return actor_loss.detach(), alpha_loss.detach(), -log_prob.mean()
