"""FastSAC networks: a tanh-Gaussian actor and an ensemble of C51 distributional critics.

Both use Linear -> LayerNorm -> SiLU blocks. The actor owns its observation normaliser as buffers,
so `actor.state_dict()` alone defines the policy the collector runs. Everything here is free of
host syncs and data-dependent Python branches, so it can be captured in a CUDA graph.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from duorl.algos.aligned_gemm import AlignedLinear, member_matmul
from duorl.algos.sac.normalizer import RunningObsNormalizer
from duorl.algos.tanh_gaussian import TanhGaussianPolicy
from duorl.gpu.triton_support import import_kernels, interpreting


class NormSiLUStack(nn.Sequential):
    """Linear -> LayerNorm -> SiLU blocks, then whatever layers follow them (the critic's head): an
    nn.Sequential (the same modules and state_dict keys) whose blocks can run fused on CUDA.

    `fuse(fold_bias)` (the learner's `algo.algo_params.layer_norm_silu`) makes each block's LayerNorm and
    SiLU one Triton kernel forward and one backward (gpu/fused_norm.py); with `fold_bias` the linear map
    runs without its bias and the kernel adds it. CPU tensors take the plain modules (unless Triton interprets: tests).
    """

    def __init__(self, *layers: nn.Module) -> None:
        super().__init__(*layers)
        self._layer_norm_silu: Callable[..., torch.Tensor] | None = None  # gpu/fused_norm.layer_norm_silu when fused
        self.fold_bias = False

    def fuse(self, fold_bias: bool) -> None:
        # imports Triton: CUDA learners only
        self._layer_norm_silu = import_kernels("fused_norm", "algo.algo_params.layer_norm_silu").layer_norm_silu
        self.fold_bias = fold_bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self._layer_norm_silu is None or not (x.is_cuda or interpreting()):
            return super().forward(x)
        layers = list(self)
        i = 0
        while i < len(layers):
            if i + 2 < len(layers) and isinstance(layers[i + 1], (nn.LayerNorm, EnsembleLayerNorm)) \
                    and isinstance(layers[i + 2], nn.SiLU):
                linear, norm = layers[i], layers[i + 1]
                if self.fold_bias:
                    x = self._layer_norm_silu(linear.unbiased(x), norm.weight, norm.bias, norm.eps, in_bias=linear.bias)
                else:
                    x = self._layer_norm_silu(linear(x), norm.weight, norm.bias, norm.eps)
                i += 3
            else:
                x = layers[i](x)
                i += 1
        return x


def mlp_trunk(in_dim: int, hidden_dims: Sequence[int]) -> NormSiLUStack:
    """Linear -> LayerNorm -> SiLU for each hidden width."""
    layers: list[nn.Module] = []
    for width in hidden_dims:
        layers += [AlignedLinear(in_dim, width), nn.LayerNorm(width), nn.SiLU()]
        in_dim = width
    return NormSiLUStack(*layers)


def fuse_layer_norm_silu(module: nn.Module, fold_bias: bool) -> None:
    """Fuse every NormSiLUStack in `module` (algo.algo_params.layer_norm_silu = fused or fused_bias)."""
    for m in module.modules():
        if isinstance(m, NormSiLUStack):
            m.fuse(fold_bias)


class TanhGaussianActor(TanhGaussianPolicy, nn.Module):
    """pi(a|s) = tanh(N(mu(s), sigma(s))), actions in [-1, 1] (the head: algos/tanh_gaussian.py).

    Observations are raw; the optional running normaliser inside the module is applied first.
    """

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        hidden_dims: Sequence[int],
        log_std_min: float,
        log_std_max: float,
        obs_normalization: bool,
    ) -> None:
        super().__init__()
        self.obs_norm = RunningObsNormalizer(obs_dim) if obs_normalization else None
        self.trunk = mlp_trunk(obs_dim, hidden_dims)
        width = hidden_dims[-1] if len(hidden_dims) else obs_dim
        self.mean_head = AlignedLinear(width, action_dim)
        self.log_std_head = AlignedLinear(width, action_dim)
        # FastSAC starts from mean 0 (the task's default pose) and the middle of the log-std range;
        # zero heads also keep early actor steps from being dominated by random head weights.
        for head in (self.mean_head, self.log_std_head):
            nn.init.zeros_(head.weight)
            nn.init.zeros_(head.bias)
        self.log_std_min = float(log_std_min)
        self.log_std_max = float(log_std_max)

    def distribution_params(self, obs_actor: torch.Tensor, training: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """(mean, log_std) of the pre-tanh Gaussian, in float32 even under autocast (LayerNorm has no
        batch statistics: `training` changes nothing)."""
        x = self.obs_norm(obs_actor) if self.obs_norm is not None else obs_actor
        h = self.trunk(x)
        return self.mean_head(h).float(), self.log_std_from(self.log_std_head(h).float())


class EnsembleLinear(nn.Module):
    """`n` independent Linear layers evaluated with one batched matmul: x [n, B, in] -> [n, B, out]."""

    def __init__(self, n: int, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n, in_dim, out_dim))
        self.bias = nn.Parameter(torch.empty(n, out_dim))
        # nn.Linear's default init, member by member: U(-1/sqrt(in), 1/sqrt(in)) for weight and bias
        bound = 1.0 / math.sqrt(in_dim)
        nn.init.uniform_(self.weight, -bound, bound)
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return member_matmul(x, self.weight, self.bias)

    def unbiased(self, x: torch.Tensor) -> torch.Tensor:
        """The product without the bias (a fused norm after it adds the bias)."""
        return member_matmul(x, self.weight)


class EnsembleLayerNorm(nn.Module):
    """LayerNorm over the last dim with a separate affine per ensemble member."""

    def __init__(self, n: int, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n, dim))
        self.bias = nn.Parameter(torch.zeros(n, dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.layer_norm(x, (x.shape[-1],), None, None, self.eps)
        return torch.addcmul(self.bias.unsqueeze(1), y, self.weight.unsqueeze(1))


class CategoricalSupportMixin:
    """The fixed return support of a categorical critic and the expectation over it (shared by the
    SAC and FlashSAC critics)."""

    support: torch.Tensor

    def _init_support(self, v_min: float, v_max: float, num_atoms: int) -> None:
        self.v_min, self.v_max = float(v_min), float(v_max)
        self.register_buffer("support", torch.linspace(v_min, v_max, num_atoms))  # type: ignore[attr-defined]

    def expected_value(self, probs: torch.Tensor) -> torch.Tensor:
        """E[Z] for probabilities [..., num_atoms] -> [...]."""
        return (probs * self.support).sum(-1)


class CategoricalCriticEnsemble(CategoricalSupportMixin, nn.Module):
    """`num_members` C51 critics Z_i(s, a) on support linspace(v_min, v_max, num_atoms).

    The members are independent networks stored as stacked weights, so twin critics cost one batched
    matmul per layer instead of two launches (half the kernels in a captured CUDA graph).
    Input obs must already be normalised (the learner owns the critic's normaliser).
    """

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        hidden_dims: Sequence[int],
        num_atoms: int,
        v_min: float,
        v_max: float,
        num_members: int = 2,
    ) -> None:
        super().__init__()
        self.num_members = num_members
        layers: list[nn.Module] = []
        in_dim = obs_dim + action_dim
        for width in hidden_dims:
            layers += [EnsembleLinear(num_members, in_dim, width), EnsembleLayerNorm(num_members, width), nn.SiLU()]
            in_dim = width
        layers.append(EnsembleLinear(num_members, in_dim, num_atoms))
        self.net = NormSiLUStack(*layers)
        self._init_support(v_min, v_max, num_atoms)

    def forward(self, obs_critic: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """Logits [num_members, B, num_atoms]."""
        x = torch.cat([obs_critic, action.to(obs_critic.dtype)], dim=-1)
        return self.net(x.unsqueeze(0).expand(self.num_members, -1, -1))
