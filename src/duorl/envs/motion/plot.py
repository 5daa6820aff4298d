"""The picture `duorl motion inspect --plot` draws: root path, heights over the floor, joints in their ranges."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from duorl.envs.motion.checks import FLOAT_HEIGHT, PENETRATION_WARN, Report


def plot_clip(rep: Report, joint_names: tuple[str, ...], out: str | Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    traj, s = rep.trajectory, rep.stats
    assert traj is not None
    t = np.arange(traj.num_frames) / traj.fps
    fig, ax = plt.subplots(2, 2, figsize=(13, 8))
    a = ax[0, 0]
    a.plot(traj.root_pos[:, 0], traj.root_pos[:, 1], lw=1.2)
    a.plot(*traj.root_pos[0, :2], "go", label="start")
    a.plot(*traj.root_pos[-1, :2], "rs", label="end")
    a.set(title="root path (top view)", xlabel="x (m)", ylabel="y (m)")
    a.set_aspect("equal", adjustable="datalim")
    a.legend(loc="best", fontsize=8)

    a = ax[0, 1]
    a.plot(t, traj.root_pos[:, 2], label="pelvis")
    a.plot(t, s["foot_height_m"], label="lowest foot point")
    a.plot(t, s["lowest_point_m"], label="lowest robot point", lw=0.8)
    if s.get("hand_height_m") is not None:
        a.plot(t, s["hand_height_m"], label="lowest hand point", lw=0.8)
    a.axhline(0.0, color="k", lw=0.8)
    a.axhspan(-1.0, -PENETRATION_WARN, color="r", alpha=0.08)
    a.axhline(FLOAT_HEIGHT, color="orange", lw=0.6, ls="--")
    a.set(title="heights over the floor (red: below it by > 1 cm)", xlabel="t (s)", ylabel="z (m)",
          ylim=(min(-0.05, float(np.min(s["lowest_point_m"])) - 0.02), max(1.0, float(traj.root_pos[:, 2].max()) + 0.05)))
    a.legend(loc="best", fontsize=8)

    a = ax[1, 0]
    lo, hi = s["joint_range"][:, 0], s["joint_range"][:, 1]
    frac = (traj.joint_pos - lo) / (hi - lo)
    for j in range(len(joint_names)):
        a.plot(t, frac[:, j], lw=0.7)  # too many for a legend: the bars beside name them
    a.axhline(0.0, color="k", lw=0.8)
    a.axhline(1.0, color="k", lw=0.8)
    a.set(title="joints within their limits (0 = lower, 1 = upper)", xlabel="t (s)", ylabel="fraction of range")

    a = ax[1, 1]
    y = np.arange(len(joint_names))
    a.barh(y, frac.max(axis=0) - frac.min(axis=0), left=frac.min(axis=0), color="tab:blue", alpha=0.7)
    a.axvline(0.0, color="k", lw=0.8)
    a.axvline(1.0, color="k", lw=0.8)
    a.set_yticks(y, [n.replace("_joint", "") for n in joint_names], fontsize=6)
    a.set(title="span of each joint in its range", xlabel="fraction of range", xlim=(-0.05, 1.05))
    verdict = "NOT USABLE" if rep.errors else "usable"
    fig.suptitle(f"{Path(rep.source.path).name}: {rep.source.format}, {traj.num_frames} frames at {traj.fps:g} fps, "
                 f"{traj.duration:.2f} s: {verdict} ({len(rep.errors)} errors, {len(rep.warnings)} warnings)")
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out
