"""C51 categorical projection of a shifted/scaled return distribution back onto a fixed support.

The distributional soft Bellman target puts the mass p_i of next-state atom z_i at
    t_i = r + gamma * (1 - done) * (z_i - alpha * log pi(a'|s'))
and projects it onto support linspace(v_min, v_max, K) by splitting each t_i linearly between its
two neighbouring support points (after clipping t_i to [v_min, v_max]).

`categorical_projection` is the vectorised version the learner uses. It avoids scatter-add: on CUDA
scatter-add accumulates with float atomics in a nondeterministic order, which would break bitwise
graph-vs-eager and resume comparisons. Instead it uses that t_i is nondecreasing in i (gamma*(1-done)
>= 0), so the atoms landing on each support point form a contiguous run; run sums are differences of
a cumulative sum, located with searchsorted. Every step is a fixed-shape kernel with no host sync.

`categorical_projection_reference` is a slow loop implementation for tests only.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def soft_target_atoms(
    support: torch.Tensor,
    reward: torch.Tensor,
    discount: torch.Tensor,
    entropy_shift: torch.Tensor,
) -> torch.Tensor:
    """t = r + discount * (z - entropy_shift): [B, K] from support [K] and per-sample [B] terms.

    `discount` is gamma * (1 - terminated); `entropy_shift` is alpha * log pi(a'|s').
    Nondecreasing along K whenever discount >= 0, as `categorical_projection` requires.
    """
    return reward.unsqueeze(-1) + discount.unsqueeze(-1) * (support - entropy_shift.unsqueeze(-1))


def categorical_projection(probs: torch.Tensor, atoms: torch.Tensor, v_min: float, v_max: float) -> torch.Tensor:
    """Project mass `probs` [..., N, K] located at `atoms` [N, K] onto linspace(v_min, v_max, K).

    `atoms` must be nondecreasing along the last dim (true for `soft_target_atoms`) and is shared by
    every leading slice of `probs` (the critic ensemble members), so the index work is done once.
    Mass is conserved up to float rounding; an atom exactly on a support point puts all its mass
    there; atoms beyond [v_min, v_max] go to the end points.
    """
    k = probs.shape[-1]
    n = atoms.numel() // k
    p = probs.reshape(-1, n, k)
    delta_z = (v_max - v_min) / (k - 1)
    # fractional support index of each atom; the final clamp guards against rounding past the ends
    b = ((atoms.reshape(n, k).clamp(v_min, v_max) - v_min) / delta_z).clamp(0.0, k - 1)
    # lower neighbour in [0, K-2] so the upper neighbour lower+1 always exists; an atom exactly on
    # point j < K-1 gets weight 1 on j, and one exactly on K-1 gets weight 1 on the upper neighbour
    lower = b.floor().clamp(max=k - 2)
    w_upper = b - lower
    w_lower = 1.0 - w_upper
    lower_idx = lower.long()  # nondecreasing along the last dim

    # n_le[:, j] = number of atoms whose lower neighbour is <= j
    bins = torch.arange(k, device=p.device).expand(n, k).contiguous()
    n_le = torch.searchsorted(lower_idx, bins, right=True).expand(p.shape[0], n, k)

    def run_sums(weights: torch.Tensor) -> torch.Tensor:
        # out[..., j] = sum of p*weights over atoms with lower neighbour == j
        csum = F.pad(torch.cumsum(p * weights, dim=-1), (1, 0))
        upto = csum.gather(-1, n_le)
        return upto - F.pad(upto[..., :-1], (1, 0))

    from_lower = run_sums(w_lower)  # mass kept on the lower neighbour j
    from_upper = run_sums(w_upper)  # mass moved to j + 1 (column K-1 is always 0: lower <= K-2)
    out = from_lower + F.pad(from_upper[..., :-1], (1, 0))
    return out.reshape(probs.shape)


def categorical_projection_reference(
    probs: torch.Tensor, atoms: torch.Tensor, v_min: float, v_max: float
) -> torch.Tensor:
    """Textbook C51 projection with Python loops over rows and atoms (float64). Tests only.

    Same contract as `categorical_projection` except that `atoms` need not be sorted.
    """
    probs, atoms = torch.broadcast_tensors(probs, atoms)
    k = probs.shape[-1]
    p = probs.reshape(-1, k).double().tolist()
    t = atoms.reshape(-1, k).double().tolist()
    delta_z = (v_max - v_min) / (k - 1)
    out = torch.zeros(len(p), k, dtype=torch.float64)
    for row in range(len(p)):
        for i in range(k):
            tz = min(max(t[row][i], v_min), v_max)
            b = (tz - v_min) / delta_z
            lo, hi = math.floor(b), math.ceil(b)
            lo, hi = max(0, min(lo, k - 1)), max(0, min(hi, k - 1))
            if lo == hi:
                out[row, lo] += p[row][i]
            else:
                out[row, lo] += p[row][i] * (hi - b)
                out[row, hi] += p[row][i] * (b - lo)
    return out.reshape(*probs.shape[:-1], k).to(probs.dtype)
