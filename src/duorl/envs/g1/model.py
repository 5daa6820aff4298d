"""The G1 as training builds it: collision geometry only, a floor, PD position actuators.

From the published model file (assets.resolve_g1_xml) this module
  - strips every visual mesh geom and the mesh assets (training never renders; the mesh files are
    then not even needed), and the model's own sensors (the tasks read state, not sensors),
  - sets collision properties of the kind published for this robot (feet condim 3, priority 1,
    friction 0.6; other collision geoms condim 1); self-collisions are off by default (the tasks
    carry no self-collision term, and each avoided contact is solver work on every substep),
  - adds a floor and one PD position actuator per joint with per-joint-group gains from the
    reflected armature of the joint's motor at a 10 Hz natural frequency and damping ratio 2
    (docs/design.md §7 table), force-limited at the motor's effort limit,
  - sets the physics options of the published G1 tasks (dt 0.005, implicitfast, Newton, 10/20
    iterations).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import mujoco
import numpy as np

PHYSICS_DT = 0.005
SUBSTEPS = 4  # 50 Hz control
NATURAL_FREQ = 2.0 * math.pi * 10.0  # rad/s
DAMPING_RATIO = 2.0

JOINT_NAMES: tuple[str, ...] = (
    "left_hip_pitch_joint", "left_hip_roll_joint", "left_hip_yaw_joint", "left_knee_joint",
    "left_ankle_pitch_joint", "left_ankle_roll_joint",
    "right_hip_pitch_joint", "right_hip_roll_joint", "right_hip_yaw_joint", "right_knee_joint",
    "right_ankle_pitch_joint", "right_ankle_roll_joint",
    "waist_yaw_joint", "waist_roll_joint", "waist_pitch_joint",
    "left_shoulder_pitch_joint", "left_shoulder_roll_joint", "left_shoulder_yaw_joint", "left_elbow_joint",
    "left_wrist_roll_joint", "left_wrist_pitch_joint", "left_wrist_yaw_joint",
    "right_shoulder_pitch_joint", "right_shoulder_roll_joint", "right_shoulder_yaw_joint", "right_elbow_joint",
    "right_wrist_roll_joint", "right_wrist_pitch_joint", "right_wrist_yaw_joint",
)
NUM_JOINTS = len(JOINT_NAMES)
ROOT_BODY = "pelvis"
ANCHOR_BODY = "torso_link"
FEET_BODIES = ("left_ankle_roll_link", "right_ankle_roll_link")
FEET_SITES = ("left_foot", "right_foot")  # on the sole, 2 mm below the foot capsules' bottom
FOOT_GEOM = re.compile(r"^(left|right)_foot[1-7]_collision$")
FOOT_FRICTION = 0.6


def _two_stage_planetary(rotor: tuple[float, float, float], gears: tuple[float, float, float]) -> float:
    """Reflected inertia at the output of a two-stage planetary gearbox (Unitree motor data)."""
    return rotor[0] * (gears[1] * gears[2]) ** 2 + rotor[1] * gears[2] ** 2 + rotor[2]


@dataclass(frozen=True)
class ActuatorGroup:
    name: str
    armature: float  # kg m^2, reflected rotor inertia
    effort: float  # N m
    joints: str  # regex over joint names

    @property
    def kp(self) -> float:
        return self.armature * NATURAL_FREQ**2

    @property
    def kd(self) -> float:
        return 2.0 * DAMPING_RATIO * self.armature * NATURAL_FREQ


_A5020 = _two_stage_planetary((0.139e-4, 0.017e-4, 0.169e-4), (1.0, 1.0 + 46.0 / 18.0, 1.0 + 56.0 / 16.0))
_A7520_14 = _two_stage_planetary((0.489e-4, 0.098e-4, 0.533e-4), (1.0, 4.5, 1.0 + 48.0 / 22.0))
_A7520_22 = _two_stage_planetary((0.489e-4, 0.109e-4, 0.738e-4), (1.0, 4.5, 5.0))
_A4010 = _two_stage_planetary((0.068e-4, 0.0, 0.0), (1.0, 5.0, 5.0))

# Ankles and waist pitch/roll are 4-bar linkages driven by two 5020 motors: nominally 1:1, so twice
# the armature and twice the effort of one motor.
ACTUATOR_GROUPS: tuple[ActuatorGroup, ...] = (
    ActuatorGroup("5020", _A5020, 25.0, r".*_(elbow|shoulder_pitch|shoulder_roll|shoulder_yaw|wrist_roll)_joint"),
    ActuatorGroup("7520_14", _A7520_14, 88.0, r"(.*_hip_pitch|.*_hip_yaw|waist_yaw)_joint"),
    ActuatorGroup("7520_22", _A7520_22, 139.0, r".*_(hip_roll|knee)_joint"),
    ActuatorGroup("2x5020", 2.0 * _A5020, 50.0, r"(.*_ankle_pitch|.*_ankle_roll|waist_pitch|waist_roll)_joint"),
    ActuatorGroup("4010", _A4010, 5.0, r".*_wrist_(pitch|yaw)_joint"),
)

# The standing pose (knees bent), docs/design.md §7; joints not named are 0.
ROOT_HEIGHT = 0.76
_POSE = {
    "hip_pitch": -0.312, "knee": 0.669, "ankle_pitch": -0.363, "elbow": 0.6, "shoulder_pitch": 0.2,
}


def group_of(joint: str) -> ActuatorGroup:
    matches = [g for g in ACTUATOR_GROUPS if re.fullmatch(g.joints, joint)]
    if len(matches) != 1:
        raise ValueError(f"joint {joint!r} matches {len(matches)} actuator groups, expected exactly 1")
    return matches[0]


def default_joint_pos() -> np.ndarray:
    q = np.zeros(NUM_JOINTS)
    for i, name in enumerate(JOINT_NAMES):
        for key, v in _POSE.items():
            if name.endswith(f"_{key}_joint"):
                q[i] = v
        if name == "left_shoulder_roll_joint":
            q[i] = 0.2
        elif name == "right_shoulder_roll_joint":
            q[i] = -0.2
    return q


def joint_mirror() -> tuple[tuple[int, ...], tuple[float, ...]]:
    """The left-right mirror of a joint vector (JOINT_NAMES order) as (index, sign): left and right
    joints swap; roll and yaw joints (axes x and z, which mirror to their negatives about the sagittal
    plane) change sign, pitch, knee and elbow joints (axis y) keep it. Waist joints map to themselves."""
    index, sign = [], []
    for name in JOINT_NAMES:
        side, _, rest = name.partition("_")
        partner = {"left": f"right_{rest}", "right": f"left_{rest}"}.get(side, name)
        index.append(JOINT_NAMES.index(partner))
        sign.append(-1.0 if ("_roll_" in name or "_yaw_" in name) else 1.0)
    return tuple(index), tuple(sign)


def per_joint(attr: str) -> np.ndarray:
    """kp, kd, effort or armature of every joint, in JOINT_NAMES order."""
    return np.array([getattr(group_of(j), attr) for j in JOINT_NAMES])


def action_scale() -> np.ndarray:
    """Joint-target offset per unit action: 0.25 * effort / kp (the published G1 choice)."""
    return 0.25 * per_joint("effort") / per_joint("kp")


def default_qpos() -> np.ndarray:
    """Free joint at (0, 0, ROOT_HEIGHT), identity orientation, joints in the standing pose."""
    return np.concatenate(([0.0, 0.0, ROOT_HEIGHT, 1.0, 0.0, 0.0, 0.0], default_joint_pos()))


def _strip_visuals(spec: mujoco.MjSpec) -> None:
    for geom in list(spec.geoms):
        if geom.type == mujoco.mjtGeom.mjGEOM_MESH or (geom.contype == 0 and geom.conaffinity == 0):
            spec.delete(geom)
    for mesh in list(spec.meshes):
        spec.delete(mesh)
    for sensor in list(spec.sensors):
        spec.delete(sensor)


def _set_collisions(spec: mujoco.MjSpec, self_collisions: bool) -> None:
    for geom in spec.geoms:
        if not geom.name.endswith("_collision"):
            continue
        foot = bool(FOOT_GEOM.match(geom.name))
        # contype 0 / conaffinity 1: such a geom touches the floor (contype 1) but no other robot geom
        geom.contype = 1 if self_collisions else 0
        geom.conaffinity = 1
        geom.condim = 3 if foot else 1
        geom.priority = 1 if foot else 0
        if foot:
            geom.friction[0] = FOOT_FRICTION


def _add_floor(spec: mujoco.MjSpec) -> None:
    spec.worldbody.add_geom(
        name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0.0, 0.0, 0.05], contype=1, conaffinity=1, condim=3,
    )


def _add_actuators(spec: mujoco.MjSpec) -> None:
    names = [j.name for j in spec.joints if j.type == mujoco.mjtJoint.mjJNT_HINGE]
    if tuple(names) != JOINT_NAMES:
        raise ValueError(f"the G1 model's hinge joints are not the 29 expected ones, in order: {names}")
    for name in JOINT_NAMES:
        g = group_of(name)
        spec.joint(name).armature = g.armature
        act = spec.add_actuator(name=name, target=name)
        act.trntype = mujoco.mjtTrn.mjTRN_JOINT
        act.dyntype = mujoco.mjtDyn.mjDYN_NONE
        act.gaintype = mujoco.mjtGain.mjGAIN_FIXED
        act.biastype = mujoco.mjtBias.mjBIAS_AFFINE
        act.gainprm[0] = g.kp
        act.biasprm[1] = -g.kp
        act.biasprm[2] = -g.kd
        # targets may lie outside the joint range (a clamped target would give no force at a limit);
        # the torque is bounded by the motor's effort instead
        act.ctrllimited = mujoco.mjtLimited.mjLIMITED_FALSE
        act.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
        act.forcerange = [-g.effort, g.effort]


def _set_options(spec: mujoco.MjSpec) -> None:
    opt = spec.option
    opt.timestep = PHYSICS_DT
    opt.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    opt.cone = mujoco.mjtCone.mjCONE_PYRAMIDAL
    opt.solver = mujoco.mjtSolver.mjSOL_NEWTON
    opt.iterations = 10
    opt.ls_iterations = 20


def build_spec(xml_path: str | Path, self_collisions: bool = False, visuals: bool = False) -> mujoco.MjSpec:
    """visuals=True keeps the mesh geoms (massless, collision-free: the dynamics are the same) for
    rendering; the mesh files must then sit next to the model (`duorl assets g1` extracts them)."""
    spec = mujoco.MjSpec.from_file(str(xml_path))
    if visuals:
        for sensor in list(spec.sensors):
            spec.delete(sensor)
    else:
        _strip_visuals(spec)
    _set_collisions(spec, self_collisions)
    _add_floor(spec)
    _add_actuators(spec)
    _set_options(spec)
    spec.add_key(name="stand", qpos=default_qpos().tolist(), ctrl=default_joint_pos().tolist())
    return spec


def build_model(xml_path: str | Path, self_collisions: bool = False, visuals: bool = False) -> mujoco.MjModel:
    """The training model (see the module docstring); visuals=True: the same with meshes, to render."""
    return build_spec(xml_path, self_collisions, visuals).compile()


@dataclass(frozen=True)
class G1Layout:
    """Indices into a built model that the tasks use (qpos/qvel addresses, bodies, geoms)."""

    joint_qpos: np.ndarray  # [29] qpos address of each joint
    joint_dof: np.ndarray  # [29] qvel address
    joint_range: np.ndarray  # [29, 2]
    body_ids: dict[str, int]
    foot_geoms: np.ndarray  # geom ids of the foot capsules
    foot_sites: tuple[int, int]

    @staticmethod
    def of(model: mujoco.MjModel) -> "G1Layout":
        jid = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n) for n in JOINT_NAMES]
        if min(jid) < 0:
            raise ValueError("the model lacks some G1 joints")
        if model.jnt_type[0] != mujoco.mjtJoint.mjJNT_FREE or model.jnt_qposadr[0] != 0 or model.nq != 7 + NUM_JOINTS:
            raise ValueError("expected a free root joint at qpos[0:7] and 29 hinge joints")
        bodies = {mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, b): b for b in range(1, model.nbody)}
        feet = [g for g in range(model.ngeom) if FOOT_GEOM.match(mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, g) or "")]
        sites = tuple(mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, s) for s in FEET_SITES)
        return G1Layout(
            joint_qpos=model.jnt_qposadr[jid].copy(),
            joint_dof=model.jnt_dofadr[jid].copy(),
            joint_range=model.jnt_range[jid].copy(),
            body_ids=bodies,
            foot_geoms=np.array(feet),
            foot_sites=sites,  # type: ignore[arg-type]
        )


def load(robot_xml: Optional[str] = None, self_collisions: bool = False, visuals: bool = False) -> mujoco.MjModel:
    """Resolve the model file (task.robot_xml, DUORL_G1_XML, mjlab, cache) and build it."""
    from duorl.envs.g1.assets import resolve_g1_xml

    return build_model(resolve_g1_xml(robot_xml), self_collisions, visuals)
