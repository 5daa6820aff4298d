"""How well the stored joint rates of real clips fit finite differences of their joint angles, at the
clip's own frame rate and with every k-th frame kept (the stated fps unchanged: a clip sped up k times).

    pip download --no-deps holosoma==0.0.3 -d wheel && unzip -o -q wheel/*.whl 'holosoma/data/motions/*' -d clips
    PYTHONPATH=src python benchmarks/2026-12-02_clip_fps_fit/fps_fit.py clips/holosoma/data/motions/g1_29dof/whole_body_tracking/*.npz

Per clip and k: frames, the least-squares factor k_ls (stored rates ~ k_ls x differences), the cosine
between them (the fit), the fps the rates fit (fps x k_ls), the mean disagreement, and the verdict of
duorl's checks (motion/checks.py: ClipChecker._wrong_rate)."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

from duorl.envs.g1 import model as g1
from duorl.envs.motion.load import inspect_motion


def main(paths: list[str]) -> None:
    model = g1.load()
    print(f"{'clip':<36} {'k':>3} {'frames':>6} {'k_ls':>6} {'cosine':>7} {'fit fps':>8} {'mean |diff|':>11}  verdict")
    for src in paths:
        with np.load(src) as z:
            data = {name: z[name] for name in z.files}
        frames = data["joint_pos"].shape[0]
        for k in (1, 2, 3, 5, 10):
            kept = {n: v[::k] if v.ndim >= 2 and v.shape[0] == frames else v for n, v in data.items()}
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / Path(src).name
                with open(path, "wb") as f:
                    np.savez(f, **kept)
                rep, _, _ = inspect_motion(path, model)
            s, st = rep.source, rep.stats
            if rep.trajectory is None:
                print(f"{Path(src).stem[:36]:<36} {k:>3} {s.num_frames:>6}  (stopped before the rates: {rep.errors[0].problem[:60]})")
                continue
            from duorl.envs.motion.fk import finite_differences

            d, g = finite_differences(rep.trajectory).joint_vel, s.joint_vel
            k_ls = float((g * d).sum() / (d * d).sum())
            cos = float((g * d).sum() / np.sqrt((g * g).sum() * (d * d).sum()))
            rate = [f for f in rep.errors if f.field == "joint_vel"]
            verdict = "fps refused" if rate else "fps accepted"
            others = [f.problem[:50] for f in rep.errors if f.field != "joint_vel"]
            print(f"{Path(src).stem[:36]:<36} {k:>3} {s.num_frames:>6} {k_ls:>6.3f} {cos:>7.3f} {s.fps * k_ls:>8.2f} "
                  f"{st['joint_vel_error_rad_s']:>11.3f}  {verdict}" + (f"; other errors: {others}" if others else ""))


if __name__ == "__main__":
    main(sys.argv[1:])
