"""FlashSAC learner (and WarpSAC, which differs only in replay sampling, chosen by the runtime).

One update (docs/design.md §3 runs `num_updates` of them per learner iteration), in FlashSAC's order:
  lr       linear warm-up then cosine, from a device-side update counter (schedule.py)
  actor    every `policy_frequency`-th update, first: alpha*log pi - min(Q1, Q2), the actor run on
           current and next observations in one pass (BatchNorm statistics over both), the critic
           with its running statistics
  alpha    with the actor: alpha * (entropy - target), target = entropy of a Gaussian with std
           `target_entropy_std` per action dim
  critic   cross-entropy to the projected soft distributional target; the target critic and the
           critic are each fed current and next observations in one forward pass; clipped double-Q
           by keeping the next-state distribution of the member with the smaller mean
  targets  Polyak average with tau
After every optimizer step the updated network's weights are re-projected to unit norm (layers.py).
Rewards are divided by the running scale of the discounted return (reward_scale.py).

Graph-friendly like the SAC learner: no host reads, fixed shapes, device learning rates, fused
AdamW (capturable on CUDA), gradients allocated once and zeroed in place, every random draw from
`self.generator`; the actor schedule follows the host counter `num_updates` (capture.py).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import torch
from torch import nn

from duorl.algos.base import Batch, SampleFn
from duorl.algos.sac_family import ACTOR_METRICS, SACFamilyLearner
from duorl.gpu.compiling import maybe_compile
from duorl.gpu.triton_support import kernels_run_on
from duorl.algos.flashsac.layers import use_batchnorm_stats_kernel
from duorl.algos.flashsac.networks import FlashSACActor, FlashSACCritic, target_entropy_from_std
from duorl.algos.flashsac.reward_scale import ReturnScale
from duorl.algos.flashsac.schedule import WarmupCosine
from duorl.algos.sac.categorical import categorical_projection, soft_target_atoms

if TYPE_CHECKING:
    from duorl.config.schema import AlgoConfig
    from duorl.envs.base import EnvSpec

METRIC_KEYS = (
    "Loss/critic", "Loss/actor", "Loss/alpha", "Policy/alpha", "Policy/entropy", "Policy/q_mean",
    "Policy/reward_scale", "Policy/learning_rate", "Train/skipped_updates",
)
_ACTOR_METRICS = ACTOR_METRICS


def build_actor(cfg: AlgoConfig, spec: EnvSpec) -> FlashSACActor:
    """The actor architecture shared by the learner and the collector (weights on CPU, fp32)."""
    return FlashSACActor(
        obs_dim=spec.actor_obs_dim,
        action_dim=spec.action_dim,
        hidden_dim=cfg.actor_hidden_dim,
        num_blocks=cfg.actor_num_blocks,
        expansion=cfg.block_expansion,
        log_std_min=cfg.log_std_min,
        log_std_max=cfg.log_std_max,
        obs_normalization=cfg.obs_normalization,
        noise_zeta_mu=cfg.noise_zeta_mu,
        noise_zeta_max=cfg.noise_zeta_max,
    )


def build_critic(cfg: AlgoConfig, spec: EnvSpec) -> FlashSACCritic:
    return FlashSACCritic(
        obs_dim=spec.critic_obs_dim,
        action_dim=spec.action_dim,
        hidden_dim=cfg.critic_hidden_dim,
        num_blocks=cfg.critic_num_blocks,
        expansion=cfg.block_expansion,
        num_atoms=cfg.num_atoms,
        v_min=cfg.v_min,
        v_max=cfg.v_max,
    )


def categorical_td_target(
    next_probs: torch.Tensor,
    support: torch.Tensor,
    reward: torch.Tensor,
    discount: torch.Tensor,
    entropy_shift: torch.Tensor,
    v_min: float,
    v_max: float,
) -> torch.Tensor:
    """The critic's target distribution [B, K] from the target critic's next-state probabilities [2, B, K].

    Clipped double-Q for distributions: per sample, the whole distribution of the member with the
    smaller mean (ties: member 0), shifted to r + discount * (z - entropy_shift) and projected back
    onto the support (mass-conserving, scatter-free: bitwise reproducible on CUDA).
    """
    next_q = (next_probs * support).sum(-1)  # [2, B]
    chosen = torch.where((next_q[0] <= next_q[1]).unsqueeze(-1), next_probs[0], next_probs[1])
    atoms = soft_target_atoms(support, reward, discount, entropy_shift)
    return categorical_projection(chosen, atoms, v_min, v_max)


class FlashSACLearner(SACFamilyLearner):
    """FlashSAC learner implementing `duorl.algos.base.Learner` and `duorl.gpu.graphs.GraphCapturable`."""

    def __init__(self, cfg: AlgoConfig, spec: EnvSpec, device: torch.device | str, seed: int) -> None:
        self._build_models(cfg, spec, device, seed, build_actor, build_critic)
        self.actor: FlashSACActor
        if cfg.algo_params.batchnorm_stats_kernel and kernels_run_on(self.device):
            # the learner's own kernels: the collector's actor (built apart) acts with running statistics
            for module in (self.actor, self.critic, self.critic_target):
                use_batchnorm_stats_kernel(module)
        self.reward_scale = ReturnScale(cfg.gamma, cfg.normalized_return_max).to(self.device)
        self.target_entropy = target_entropy_from_std(cfg.target_entropy_std, spec.action_dim)

        decay = cfg.lr_decay_updates or max(cfg.max_iterations * cfg.updates_per_step, 1)
        self.lr_schedule = WarmupCosine(cfg.lr_warmup_updates, decay, cfg.lr_end_ratio).to(self.device)

        self.actor_optimizer = self._adamw(self._actor_params, cfg.actor_lr, cfg.weight_decay)
        self.critic_optimizer = self._adamw(self._critic_params, cfg.critic_lr, cfg.weight_decay)
        self.alpha_optimizer = self._adamw([self.log_alpha], cfg.alpha_lr, 0.0)
        self._lrs = [
            (self.actor_optimizer.param_groups[0]["lr"], cfg.actor_lr),
            (self.critic_optimizer.param_groups[0]["lr"], cfg.critic_lr),
            (self.alpha_optimizer.param_groups[0]["lr"], cfg.alpha_lr),
        ]
        self._finish_build(seed)
        self._project_actor = maybe_compile(self.actor.project_, self.compiled)
        self._project_critic = maybe_compile(self.critic.project_, self.compiled)

    # ------------------------------------------------------------------ construction helpers

    def _autocast(self) -> contextlib.AbstractContextManager:
        if self.cfg.use_autocast and self.device.type == "cuda":
            # no weight-cast cache: casts are recomputed inside every (captured) region
            return torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False)
        return contextlib.nullcontext()

    # ------------------------------------------------------------------ graph support

    def graph_modules(self) -> list[nn.Module]:
        mods: list[nn.Module] = [self.actor, self.critic, self.critic_target, self.reward_scale, self.lr_schedule]
        if self.critic_obs_norm is not None:
            mods.append(self.critic_obs_norm)
        return mods

    # ------------------------------------------------------------------ Learner protocol

    def observe_rewards(self, reward: torch.Tensor, done: torch.Tensor) -> None:
        """Rewards and done flags of the new ticks, [T, num_envs], oldest first."""
        if self.cfg.normalize_reward:
            self.reward_scale.observe(reward.to(self.device), done.to(self.device), self._stats_gather())

    def train_iteration(self, sample: SampleFn, num_updates: int) -> dict[str, torch.Tensor]:
        critic_loss_sum = torch.zeros((), device=self.device)
        q_mean_sum = torch.zeros((), device=self.device)
        actor_sums = {k: torch.zeros((), device=self.device) for k in _ACTOR_METRICS}
        actor_updates = 0
        lr_factor = torch.ones((), device=self.device)
        scale = self.reward_scale.scale() if self.cfg.normalize_reward else torch.ones((), device=self.device)
        for u in range(num_updates):
            self._update_index = u
            batch = self._augmented(sample(self.cfg.batch_size))
            lr_factor = self.lr_schedule.apply_(self._lrs)
            obs_critic = self._normalize_critic_obs(batch.obs_critic)
            next_obs_critic = self._normalize_critic_obs(batch.next_obs_critic)
            if self._actor_due():
                for k, v in zip(_ACTOR_METRICS, self._update_actor_and_alpha(batch, obs_critic)):
                    actor_sums[k] += v
                actor_updates += 1
            critic_loss, q_mean, critic_ok = self._update_critic(batch, batch.reward / scale, obs_critic,
                                                                 next_obs_critic)
            critic_loss_sum += critic_loss
            q_mean_sum += q_mean
            self._update_targets(critic_ok)
            self.lr_schedule.advance_()
            self.num_updates += 1

        self.grad_sync.average_buffers()
        if actor_updates:
            for k in _ACTOR_METRICS:
                self._last_actor_metrics[k].copy_(actor_sums[k] / actor_updates)
        metrics = {k: v.clone() for k, v in self._last_actor_metrics.items()}
        metrics["Loss/critic"] = critic_loss_sum / max(num_updates, 1)
        metrics["Policy/q_mean"] = q_mean_sum / max(num_updates, 1)
        metrics["Policy/alpha"] = self.log_alpha.detach().exp()
        metrics["Policy/reward_scale"] = scale.clone()
        metrics["Policy/learning_rate"] = (lr_factor * self.cfg.critic_lr).float()
        metrics["Train/skipped_updates"] = self.skipped_updates.clone()
        return {k: metrics[k] for k in METRIC_KEYS}

    def _extra_state(self) -> dict:
        return {"reward_scale": self.reward_scale.state_dict(), "lr_schedule": self.lr_schedule.state_dict()}

    def _load_extra_state(self, state: dict) -> None:
        rs = dict(state["reward_scale"])
        if "returns" in rs:  # a checkpoint written while the per-env returns were a buffer
            rs["_extra_state"] = {"returns": rs.pop("returns")}
        self.reward_scale.load_state_dict(rs)
        self.lr_schedule.load_state_dict(state["lr_schedule"])

    # ------------------------------------------------------------------ one update

    def _actor_due(self) -> bool:
        # FlashSAC updates the actor on updates 0, f, 2f, ... (before that update's critic step)
        return self.num_updates % self.cfg.policy_frequency == 0

    def _sample(self, obs_actor: torch.Tensor, training: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """(action, log_prob): the actor's reparameterised sample, noise from self.generator."""
        mean, log_std = self._actor_dist(obs_actor, training)
        noise = torch.randn(mean.shape, generator=self.generator, device=mean.device, dtype=mean.dtype)
        return self._squash(mean, log_std, noise)

    def _update_actor_and_alpha(
        self, batch: Batch, obs_critic: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        b = batch.obs_actor.shape[0]
        with self._critic_frozen():
            with self._autocast():
                obs_all = torch.cat([batch.obs_actor, batch.next_obs_actor], dim=0)
                action_all, log_prob_all = self._sample(obs_all, training=True)
                action, log_prob = action_all[:b], log_prob_all[:b]
                logits = self._critic_fn(obs_critic, action, training=False)
            q = self.critic.expected_value(logits.float().softmax(-1))  # [2, B]
            alpha = self.log_alpha.detach().exp()
            actor_loss = (alpha * log_prob - torch.minimum(q[0], q[1])).mean()
            actor_ok = self._optimizer_step(self.actor_optimizer, "actor", actor_loss)
        self._project_actor(actor_ok)

        entropy = -log_prob.detach().mean()
        alpha_loss = self.log_alpha.exp() * (entropy - self.target_entropy)
        self._optimizer_step(self.alpha_optimizer, "alpha", alpha_loss)
        return actor_loss.detach(), alpha_loss.detach(), entropy

    def _update_critic(
        self, batch: Batch, reward: torch.Tensor, obs_critic: torch.Tensor, next_obs_critic: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        b = reward.shape[0]
        obs_all = torch.cat([obs_critic, next_obs_critic], dim=0)
        with torch.no_grad():
            with self._autocast():
                next_action, next_log_prob = self._sample(batch.next_obs_actor, training=False)
                act_all = torch.cat([batch.action, next_action.to(batch.action.dtype)], dim=0)
                target_logits = self._target_fn(obs_all, act_all, training=True)[:, b:]
            target = categorical_td_target(
                target_logits.float().softmax(-1),
                self.critic.support,
                reward,
                self.cfg.gamma * (1.0 - batch.terminated),
                self.log_alpha.exp() * next_log_prob,
                self.cfg.v_min,
                self.cfg.v_max,
            )

        with self._autocast():
            logits = self._critic_fn(obs_all, act_all, training=True)[:, :b]
        log_probs = logits.float().log_softmax(-1)
        loss = -(target * log_probs).sum(-1).mean()
        critic_ok = self._optimizer_step(self.critic_optimizer, "critic", loss)
        self._project_critic(critic_ok)
        self._count_skip(critic_ok)
        q_mean = self.critic.expected_value(log_probs.detach().exp()).mean()
        return loss.detach(), q_mean, critic_ok

