"""C51 projection: vectorised version against the loop reference, mass conservation, edge cases."""

from __future__ import annotations

import torch

from duorl.algos.sac.categorical import (
    categorical_projection,
    categorical_projection_reference,
    soft_target_atoms,
)

V_MIN, V_MAX, K = -10.0, 10.0, 41
DZ = (V_MAX - V_MIN) / (K - 1)
SUPPORT = torch.linspace(V_MIN, V_MAX, K)


def _random_case(seed: int, b: int = 96) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    probs = torch.softmax(torch.randn(2, b, K, generator=g) * 3, -1)
    reward = torch.randn(b, generator=g) * 4
    discount = torch.full((b,), 0.97)
    shift = torch.randn(b, generator=g) * 2
    # edge cases: clipped high/low, terminal rows, rewards on support points, gamma = 1, zero shift
    reward[0:4] = torch.tensor([100.0, -100.0, V_MAX, V_MIN])
    discount[4:12] = 0.0
    reward[4:12] = torch.tensor([V_MIN, V_MAX, 0.0, DZ, -3 * DZ, 0.3, 1e-7, V_MAX - 1e-6])
    discount[12:20] = 1.0
    shift[12:20] = 0.0
    reward[12:20] = torch.tensor([0.0, DZ, -2 * DZ, 5 * DZ, 0.5 * DZ, 30.0, -30.0, 1e-6])
    return probs, soft_target_atoms(SUPPORT, reward, discount, shift)


def test_matches_reference_and_conserves_mass() -> None:
    for seed in range(3):
        probs, atoms = _random_case(seed)
        fast = categorical_projection(probs, atoms, V_MIN, V_MAX)
        slow = categorical_projection_reference(probs, atoms.expand_as(probs), V_MIN, V_MAX)
        assert fast.shape == probs.shape
        torch.testing.assert_close(fast, slow, atol=2e-6, rtol=0)
        torch.testing.assert_close(fast.sum(-1), torch.ones(probs.shape[:-1]), atol=2e-6, rtol=0)
        assert (fast >= 0).all()


def test_atoms_on_support_points_keep_their_mass() -> None:
    g = torch.Generator().manual_seed(1)
    probs = torch.softmax(torch.randn(1, 4, K, generator=g), -1)
    zeros = torch.zeros(4)
    # identity: t_i = z_i exactly
    same = categorical_projection(probs, soft_target_atoms(SUPPORT, zeros, torch.ones(4), zeros), V_MIN, V_MAX)
    torch.testing.assert_close(same, probs, atol=1e-7, rtol=0)
    # shift by exactly 3 support points: mass moves 3 bins up, the top 3 bins pile onto the last point
    shifted = categorical_projection(
        probs, soft_target_atoms(SUPPORT, torch.full((4,), 3 * DZ), torch.ones(4), zeros), V_MIN, V_MAX
    )
    expect = torch.zeros_like(probs)
    expect[..., 3:] = probs[..., :-3]
    expect[..., -1] += probs[..., -3:].sum(-1)
    torch.testing.assert_close(shifted, expect, atol=1e-6, rtol=0)


def test_clipping_and_terminal_rows() -> None:
    probs = torch.softmax(torch.randn(1, 5, K), -1)
    reward = torch.tensor([1e3, -1e3, V_MAX, V_MIN, 0.25 * DZ])
    discount = torch.tensor([0.97, 0.97, 0.0, 0.0, 0.0])
    out = categorical_projection(probs, soft_target_atoms(SUPPORT, reward, discount, torch.zeros(5)), V_MIN, V_MAX)[0]
    mid = K // 2  # support point 0.0
    expect = torch.zeros(5, K)
    expect[0, -1] = expect[1, 0] = expect[2, -1] = expect[3, 0] = 1.0
    expect[4, mid], expect[4, mid + 1] = 0.75, 0.25  # split linearly between the two neighbours
    torch.testing.assert_close(out, expect, atol=1e-6, rtol=0)


def test_probs_shape_without_leading_member_dim() -> None:
    probs, atoms = _random_case(7, b=24)
    one = categorical_projection(probs[0], atoms, V_MIN, V_MAX)
    torch.testing.assert_close(one, categorical_projection(probs, atoms, V_MIN, V_MAX)[0])
