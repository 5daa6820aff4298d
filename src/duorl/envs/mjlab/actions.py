"""How the learner's actions in [-1, 1] drive an mjlab task's action terms.

duorl's policy ends in tanh, so every action entry lies in [-1, 1]. mjlab's terms take the raw output of
its own PPO policy (a Gaussian that starts with standard deviation 1) and map it themselves; each task
sizes its terms' `scale` for that range (the Unitree robots' joint position scale is 0.25 * effort limit
/ stiffness, duorl's own G1 `pd` range). So duorl hands its action over as mjlab's raw action, unchanged,
and the term applies its own scale, offset and clip. Per term type (docs/tasks.md states the same table):
"""

from __future__ import annotations

from typing import Any

from duorl.envs.mjlab.family import NotTrainable

# mjlab action term configuration class -> what a duorl action a in [-1, 1] becomes
ACTION_MAPPINGS: dict[str, str] = {
    "JointPositionActionCfg": "joint position target = default pose (use_default_offset) or offset + scale * a",
    "RelativeJointPositionActionCfg": "joint position target = current position + scale * a",
    "JointVelocityActionCfg": "joint velocity target = default velocity (use_default_offset) or offset + scale * a",
    "JointEffortActionCfg": "joint effort = offset + scale * a, then the actuator's ctrlrange "
                            "(the cartpole: scale 1, ctrlrange [-1, 1]: a spans the motor's range)",
    "TendonLengthActionCfg": "tendon length target = offset + scale * a",
    "TendonVelocityActionCfg": "tendon velocity target = offset + scale * a",
    "TendonEffortActionCfg": "tendon effort = offset + scale * a",
    "SiteEffortActionCfg": "site effort = offset + scale * a",
}


def check_action_terms(task_id: str, cfg: Any) -> None:
    """NotTrainable (an InputRefused) for an action term whose type has no mapping above (a task's own ActionTerm: duorl
    cannot know what range it expects). Reads the configuration only."""
    for name, term in cfg.actions.items():
        kind = type(term).__name__
        if kind not in ACTION_MAPPINGS:
            raise NotTrainable(
                f"mjlab:{task_id}: its action term '{name}' is a {kind}, and duorl maps its actions in [-1, 1] only to "
                f"{', '.join(sorted(ACTION_MAPPINGS))} (docs/tasks.md, mjlab tasks). Fix: use one of those term types",
                f"action term {kind}")
