"""How far a joint target moves per unit of action in the two G1 action ranges (task.action_range):
`pd` (+-0.25 * effort / kp about the standing pose) and `joint_limits` (+-1 reaches the joint limit
farther from the pose, the published FastSAC G1 scaling). The action-rate penalty is quadratic in
action changes, so for the same joint motion it is ratio^2 times larger under `pd`.

    .venv/bin/python benchmarks/scripts/action_scale_ratio_cpu.py > benchmarks/2026-11-29_cpu_probes/action_scale_ratio_cpu.txt
"""

import numpy as np

from duorl.envs.g1 import model as g1
from duorl.envs.g1.assets import resolve_g1_xml


def main() -> None:
    m = g1.build_model(resolve_g1_xml(None))
    layout = g1.G1Layout.of(m)
    q0 = g1.default_joint_pos()
    limits = np.maximum(np.abs(layout.joint_range[:, 0] - q0), np.abs(layout.joint_range[:, 1] - q0))
    pd = g1.action_scale()
    ratio = limits / pd
    print(f"{'joint':28s} {'pd rad':>7s} {'limits rad':>10s} {'ratio':>6s} {'penalty x':>9s}")
    for name, a, b, r in zip(g1.JOINT_NAMES, pd, limits, ratio):
        print(f"{name:28s} {a:7.3f} {b:10.3f} {r:6.1f} {r * r:9.1f}")
    print(f"median ratio: legs (12) {np.median(ratio[:12]):.1f}, all {np.median(ratio):.1f}")


if __name__ == "__main__":
    main()
