"""A clip's derived arrays from its state trajectory, on duorl's own G1 model (MuJoCo C, host side).

- velocities: finite differences of the poses (central inside, one-sided at the ends): joint and
  root linear rates by np.gradient, the root's angular rate from consecutive orientations;
- body poses and velocities: MuJoCo's kinematics of (qpos, qvel) frame by frame, so a robot put in
  the clip's joint/root state at frame k has exactly the clip's body poses and velocities there;
- the lowest point of every collision geom per frame (floor contact checks).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import mujoco
import numpy as np

from duorl.envs.motion.clip import MotionClip
from duorl.envs.motion.trajectory import Trajectory, angular_velocity_world


@dataclass(frozen=True)
class StateRates:
    """Frame-by-frame velocities of a Trajectory (qvel without the free joint's body-frame twist)."""

    root_lin_vel: np.ndarray  # [T, 3] world frame
    root_ang_vel_w: np.ndarray  # [T, 3] world frame
    joint_vel: np.ndarray  # [T, J]


def finite_differences(traj: Trajectory) -> StateRates:
    dt = 1.0 / traj.fps
    order = 2 if traj.num_frames >= 3 else 1  # np.gradient's second-order ends need 3 frames
    return StateRates(root_lin_vel=np.gradient(traj.root_pos, dt, axis=0, edge_order=order),
                      root_ang_vel_w=angular_velocity_world(traj.root_quat, dt),
                      joint_vel=np.gradient(traj.joint_pos, dt, axis=0, edge_order=order))


def _rotate_inv(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    m = np.zeros(9)
    mujoco.mju_quat2Mat(m, q)
    return m.reshape(3, 3).T @ v


class ClipKinematics:
    """Forward kinematics of one G1 model over whole trajectories."""

    def __init__(self, model: mujoco.MjModel) -> None:
        self.model = model
        self.data = mujoco.MjData(model)
        self.body_names = tuple(model.body(b).name for b in range(1, model.nbody))
        self.joint_names = tuple(model.joint(j).name for j in range(model.njnt)
                                 if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE)
        self.geoms = np.array([g for g in range(model.ngeom) if model.geom_bodyid[g] > 0])
        self._root_of = model.body_rootid[1:]

    def poses(self, traj: Trajectory) -> tuple[np.ndarray, np.ndarray]:
        """Body positions [T, B, 3] and orientations [T, B, 4] (every body but the world)."""
        m, d = self.model, self.data
        pos = np.zeros((traj.num_frames, m.nbody - 1, 3))
        quat = np.zeros((traj.num_frames, m.nbody - 1, 4))
        for k, q in enumerate(traj.qpos()):
            d.qpos[:] = q
            mujoco.mj_kinematics(m, d)
            pos[k], quat[k] = d.xpos[1:], d.xquat[1:]
        return pos, quat

    def build(self, traj: Trajectory, rates: Optional[StateRates] = None) -> MotionClip:
        """The canonical clip of `traj`: body arrays by kinematics, velocities by `rates`
        (default: finite differences of the trajectory)."""
        m, d = self.model, self.data
        r = finite_differences(traj) if rates is None else rates
        n, nb = traj.num_frames, m.nbody - 1
        out = {k: np.zeros((n, nb, w)) for k, w in
               (("body_pos_w", 3), ("body_quat_w", 4), ("body_lin_vel_w", 3), ("body_ang_vel_w", 3))}
        for k, q in enumerate(traj.qpos()):
            d.qpos[:] = q
            # the free joint takes its angular velocity in the body frame
            d.qvel[:] = np.concatenate((r.root_lin_vel[k], _rotate_inv(traj.root_quat[k], r.root_ang_vel_w[k]),
                                        r.joint_vel[k]))
            mujoco.mj_kinematics(m, d)
            mujoco.mj_comPos(m, d)
            mujoco.mj_comVel(m, d)
            # cvel is each body's twist about its tree's centre of mass, world-aligned: move it to
            # the body origin (what mj_objectVelocity(mjOBJ_XBODY, flg_local=0) returns)
            ang, lin = d.cvel[1:, :3], d.cvel[1:, 3:]
            arm = d.xpos[1:] - d.subtree_com[self._root_of]
            out["body_pos_w"][k], out["body_quat_w"][k] = d.xpos[1:], d.xquat[1:]
            out["body_ang_vel_w"][k] = ang
            out["body_lin_vel_w"][k] = lin - np.cross(arm, ang)
        return MotionClip(fps=float(traj.fps), joint_pos=traj.joint_pos.copy(), joint_vel=r.joint_vel.copy(),
                          body_names=self.body_names, joint_names=self.joint_names, **out)

    def lowest_points(self, traj: Trajectory) -> np.ndarray:
        """[T, G] the world height of the lowest point of each robot collision geom (self.geoms):
        spheres, capsules, cylinders and boxes exactly, other shapes by their bounding sphere."""
        m, d = self.model, self.data
        g = self.geoms
        size, kind = m.geom_size[g], m.geom_type[g]
        low = np.zeros((traj.num_frames, len(g)))
        for k, q in enumerate(traj.qpos()):
            d.qpos[:] = q
            mujoco.mj_kinematics(m, d)
            rz = d.geom_xmat[g].reshape(-1, 3, 3)[:, 2, :]  # world z of each geom axis
            reach = np.where(kind == mujoco.mjtGeom.mjGEOM_SPHERE, size[:, 0], m.geom_rbound[g])
            capsule = size[:, 0] + size[:, 1] * np.abs(rz[:, 2])
            cylinder = size[:, 1] * np.abs(rz[:, 2]) + size[:, 0] * np.sqrt(np.clip(1.0 - rz[:, 2] ** 2, 0.0, 1.0))
            box = (np.abs(rz) * size).sum(axis=1)
            reach = np.where(kind == mujoco.mjtGeom.mjGEOM_CAPSULE, capsule, reach)
            reach = np.where(kind == mujoco.mjtGeom.mjGEOM_CYLINDER, cylinder, reach)
            reach = np.where(kind == mujoco.mjtGeom.mjGEOM_BOX, box, reach)
            low[k] = d.geom_xpos[g, 2] - reach
        return low
