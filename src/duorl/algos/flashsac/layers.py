"""FlashSAC building blocks: unit-norm linear maps, BatchNorm and RMSNorm, inverted-residual blocks.

Every layer takes an optional ensemble size `members`: with members=None tensors are [B, d], with
members=n they are [n, B, d] and every member has its own weights (the twin critic is one batched
network, so each layer is one kernel for both members).

Weights live on a sphere: `project_unit_norm(module)` re-projects them after every optimizer step
- each output row of a linear map to unit L2 norm (over its input features),
- the (scale, bias) pair of a BatchNorm jointly, and the scale of an RMSNorm, to norm sqrt(d) (the
  norm of the all-ones scale they start from).
With normalised layers around them the projections change no function the network can express, but
they pin the effective learning rate (weights cannot grow and make Adam steps relatively smaller).
Everything is in place and free of host syncs, so it runs inside a captured CUDA graph.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from duorl.algos import aligned_gemm
from duorl.gpu.triton_support import import_kernels, interpreting


def _shape(members: int | None, *dims: int) -> tuple[int, ...]:
    return dims if members is None else (members, *dims)


class UnitLinear(nn.Module):
    """y = x W^T without bias; rows of W (one per output feature) have unit norm."""

    def __init__(self, in_dim: int, out_dim: int, members: int | None = None) -> None:
        super().__init__()
        self.members = members
        self.weight = nn.Parameter(torch.empty(_shape(members, out_dim, in_dim)))
        for w in self.weight.data.reshape(-1, out_dim, in_dim):
            nn.init.orthogonal_(w)
        self.project_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.members is None:
            return aligned_gemm.linear(x, self.weight)
        return aligned_gemm.member_matmul(x, self.weight.transpose(1, 2))  # [n, B, in] @ [n, in, out]

    @torch.no_grad()
    def project_(self, apply: torch.Tensor | None = None) -> None:
        _assign_(self.weight, F.normalize(self.weight, dim=-1, eps=1e-8), apply)


def _assign_(t: torch.Tensor, new: torch.Tensor, apply: torch.Tensor | None) -> None:
    """t = new, or (with `apply`, a 0-d device tensor) only where apply > 0: a skipped optimizer step
    leaves the weights bitwise as they were, re-projection included."""
    t.copy_(new if apply is None else torch.where(apply > 0, new, t))


def _rescale_(tensors: list[torch.Tensor], dim: int, apply: torch.Tensor | None = None) -> None:
    """Scale the concatenation of `tensors` (same shape, features last) to norm sqrt(dim)."""
    sq = sum((t * t).sum(-1, keepdim=True) for t in tensors)
    factor = math.sqrt(dim) * torch.rsqrt(sq + 1e-8)
    for t in tensors:
        if apply is None:
            t.mul_(factor)
        else:
            _assign_(t, t * factor, apply)


class UnitBatchNorm(nn.Module):
    """BatchNorm over the batch dim (-2) with an affine whose (scale, bias) has norm sqrt(d).

    Statistics are computed in float32 (also under autocast); running statistics are float buffers
    only, so an actor using this travels on the weight board.
    """

    def __init__(self, dim: int, members: int | None = None, momentum: float = 0.01, eps: float = 1e-5) -> None:
        super().__init__()
        self.dim, self.momentum, self.eps = dim, momentum, eps
        self.weight = nn.Parameter(torch.ones(_shape(members, dim)))
        self.bias = nn.Parameter(torch.zeros(_shape(members, dim)))
        self.register_buffer("running_mean", torch.zeros(_shape(members, dim)))
        self.register_buffer("running_var", torch.ones(_shape(members, dim)))
        # gpu/column_stats.column_mean_var once use_stats_kernel() is called
        self._column_mean_var: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]] | None = None

    def use_stats_kernel(self) -> None:
        """Batch statistics by gpu/column_stats.py's Triton reduction where no gradient flows through them
        (algo.algo_params.batchnorm_stats_kernel); imports Triton."""
        self._column_mean_var = import_kernels("column_stats", "algo.algo_params.batchnorm_stats_kernel").column_mean_var

    def forward(self, x: torch.Tensor, training: bool) -> torch.Tensor:
        x = x.float()
        if not training:
            mean, var = self.running_mean.unsqueeze(-2), self.running_var.unsqueeze(-2)
        else:
            if self._column_mean_var is not None and not x.requires_grad and (x.is_cuda or interpreting()):
                mean, var = self._column_mean_var(x)
            else:
                # mean, then the mean squared deviation: ~9x faster on the CPU than var_mean over dim -2
                mean = x.mean(-2, keepdim=True)
                var = (x - mean).square().mean(-2, keepdim=True)
            with torch.no_grad():
                b = x.shape[-2]
                self.running_mean.lerp_(mean.squeeze(-2), self.momentum)
                self.running_var.lerp_(var.squeeze(-2) * (b / max(b - 1, 1)), self.momentum)
        y = (x - mean) * torch.rsqrt(var + self.eps)
        return torch.addcmul(self.bias.unsqueeze(-2), y, self.weight.unsqueeze(-2))

    @torch.no_grad()
    def project_(self, apply: torch.Tensor | None = None) -> None:
        _rescale_([self.weight, self.bias], self.dim, apply)


class UnitRMSNorm(nn.Module):
    """x / rms(x) * scale, with the scale at norm sqrt(d)."""

    def __init__(self, dim: int, members: int | None = None, eps: float = 1e-6) -> None:
        super().__init__()
        self.dim, self.eps = dim, eps
        self.weight = nn.Parameter(torch.ones(_shape(members, dim)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.float()
        return x * torch.rsqrt(x.square().mean(-1, keepdim=True) + self.eps) * self.weight.unsqueeze(-2)

    @torch.no_grad()
    def project_(self, apply: torch.Tensor | None = None) -> None:
        _rescale_([self.weight], self.dim, apply)


class Embedder(nn.Module):
    """Input BatchNorm (the observation normaliser FlashSAC learns with) and a unit linear map."""

    def __init__(self, in_dim: int, hidden_dim: int, members: int | None = None) -> None:
        super().__init__()
        self.norm = UnitBatchNorm(in_dim, members)
        self.linear = UnitLinear(in_dim, hidden_dim, members)

    def forward(self, x: torch.Tensor, training: bool) -> torch.Tensor:
        return self.linear(self.norm(x, training))


class InvertedResidualBlock(nn.Module):
    """x + relu(BN(W2 relu(BN(W1 x)))): expand to `expansion * d`, project back, add the skip.

    BatchNorm comes before each activation (pre-activation normalisation); the network normalises
    the sum of the blocks once at the end (post-block RMSNorm, in the owner).
    """

    def __init__(self, dim: int, expansion: int, members: int | None = None) -> None:
        super().__init__()
        wide = dim * expansion
        self.expand = UnitLinear(dim, wide, members)
        self.norm1 = UnitBatchNorm(wide, members)
        self.contract = UnitLinear(wide, dim, members)
        self.norm2 = UnitBatchNorm(dim, members)

    def forward(self, x: torch.Tensor, training: bool) -> torch.Tensor:
        h = F.relu(self.norm1(self.expand(x), training))
        h = F.relu(self.norm2(self.contract(h), training))
        return x + h


class Trunk(nn.Module):
    """Embedder -> blocks -> RMSNorm: the shared body of the FlashSAC actor and critic."""

    def __init__(self, in_dim: int, hidden_dim: int, num_blocks: int, expansion: int, members: int | None = None) -> None:
        super().__init__()
        self.embed = Embedder(in_dim, hidden_dim, members)
        self.blocks = nn.ModuleList(InvertedResidualBlock(hidden_dim, expansion, members) for _ in range(num_blocks))
        self.post_norm = UnitRMSNorm(hidden_dim, members)

    def forward(self, x: torch.Tensor, training: bool) -> torch.Tensor:
        h = self.embed(x, training)
        for block in self.blocks:
            h = block(h, training)
        return self.post_norm(h)


_PROJECTED = (UnitLinear, UnitBatchNorm, UnitRMSNorm)


def use_batchnorm_stats_kernel(module: nn.Module) -> None:
    """Every UnitBatchNorm of `module` computes batch statistics that need no gradient with the Triton
    reduction (algo.algo_params.batchnorm_stats_kernel)."""
    for m in module.modules():
        if isinstance(m, UnitBatchNorm):
            m.use_stats_kernel()


def projected_layers(module: nn.Module) -> list[nn.Module]:
    """The layers `project_unit_norm` touches, in module order."""
    return [m for m in module.modules() if isinstance(m, _PROJECTED)]


@torch.no_grad()
def project_unit_norm(module: nn.Module, apply: torch.Tensor | None = None) -> None:
    """Re-project every unit-norm layer of `module` (call after each optimizer step; with `apply`, only
    when that step's verdict is 1)."""
    for m in projected_layers(module):
        m.project_(apply)
