"""Batched quaternion math in torch, MuJoCo's convention: (w, x, y, z), Hamilton product, unit norm.

Every function works on [..., 4] / [..., 3] tensors with broadcasting, so tasks apply them to
whole batches (and per-body batches) with no Python loop.
"""

from __future__ import annotations

import torch


def mul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a * b (apply b first, then a)."""
    aw, ax, ay, az = a.unbind(-1)
    bw, bx, by, bz = b.unbind(-1)
    return torch.stack(
        (
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ),
        dim=-1,
    )


def conj(q: torch.Tensor) -> torch.Tensor:
    # no constant tensor from a Python list here: that is a host-to-device copy (a sync) per call
    return torch.cat((q[..., :1], -q[..., 1:]), dim=-1)


def normalize(q: torch.Tensor) -> torch.Tensor:
    return q / q.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def rotate(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """R(q) v, without building the matrix: v + 2w (u x v) + 2 u x (u x v)."""
    w, u = q[..., :1], q[..., 1:]
    t = 2.0 * torch.cross(u, v, dim=-1)
    return v + w * t + torch.cross(u, t, dim=-1)


def rotate_inv(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """R(q)^T v: a world vector in the frame q."""
    return rotate(conj(q), v)


def from_axis_angle(axis: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
    """axis [..., 3] (unit), angle [...] -> [..., 4]."""
    half = 0.5 * angle.unsqueeze(-1)
    return torch.cat((torch.cos(half), torch.sin(half) * axis), dim=-1)


def to_matrix(q: torch.Tensor) -> torch.Tensor:
    """[..., 4] -> [..., 3, 3]."""
    w, x, y, z = q.unbind(-1)
    return torch.stack(
        (
            1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
            2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
            2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
        ),
        dim=-1,
    ).reshape(*q.shape[:-1], 3, 3)


def yaw(q: torch.Tensor) -> torch.Tensor:
    """Heading angle: the world yaw of the frame's x axis."""
    w, x, y, z = q.unbind(-1)
    return torch.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def yaw_quat(q: torch.Tensor) -> torch.Tensor:
    """The rotation about world z that has q's heading."""
    half = 0.5 * yaw(q)
    zero = torch.zeros_like(half)
    return torch.stack((torch.cos(half), zero, zero, torch.sin(half)), dim=-1)


def angle_between(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The rotation angle in [0, pi] that takes b to a (|log(a b*)|), sign-of-q safe."""
    d = mul(a, conj(b))
    return 2.0 * torch.atan2(d[..., 1:].norm(dim=-1), d[..., 0].abs())


def gravity_in(q: torch.Tensor) -> torch.Tensor:
    """The unit gravity direction (0, 0, -1) seen in the frame q ("projected gravity"): R(q)^T (0, 0, -1),
    minus the third row of R. Written out: filling a constant vector in place costs a host-to-device
    copy of the scalar on CUDA (a sync, and a failed CUDA-graph capture)."""
    w, x, y, z = q.unbind(-1)
    return torch.stack((-2.0 * (x * z - w * y), -2.0 * (y * z + w * x), -(1.0 - 2.0 * (x * x + y * y))), dim=-1)
