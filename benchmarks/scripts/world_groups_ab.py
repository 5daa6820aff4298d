"""Do K groups of worlds stepped on K concurrent streams beat one batch of all the worlds? (GPU, physics only)

    python3 benchmarks/scripts/world_groups_ab.py [--num-envs 4096] [--groups 1 2 4] [--ticks 200] [--repeats 2]

A g1_walk_flat collector tick (captured, uncompiled) steps the worlds for `--warmup` ticks under the
untrained actor, so the state holds standing, falling and fallen robots. That state (qpos, qvel, ctrl,
warm start) is then copied into each arm's MuJoCo Warp data: one arm per K in `--groups`, K datas of
N/K worlds each, on one shared model (no per-world randomisation in any arm). An arm's control step is
its K groups' 4 substeps, group k on stream k, forked from and joined back into one stream, captured as
one warp graph. Every arm starts each repeat from the same state; worlds are independent, so every
arm does the same physics. Arms run round-robin; the timing is `--ticks` graph replays with one
synchronisation at the end.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import torch

from duorl.cli.bench.collector import build_collector_tick
from duorl.cli.bench.report import emit
from duorl.cli.configure import load_config
from duorl.envs.tasks import g1_common

STATE = ("qpos", "qvel", "ctrl", "qacc_warmstart", "time")


class Arm:
    def __init__(self, wp: Any, mjw: Any, mj_model: Any, mjd: Any, num_envs: int, groups: int, dev: str) -> None:
        if num_envs % groups:
            raise SystemExit(f"error: --num-envs {num_envs} is not divisible into {groups} groups")
        self.wp, self.mjw, self.groups, self.dev = wp, mjw, groups, dev
        self.per = num_envs // groups
        with wp.ScopedDevice(dev):
            self.m = mjw.put_model(mj_model)
            self.m.opt.graph_conditional = False
            self.datas = [mjw.put_data(mj_model, mjd, nworld=self.per, **g1_common.MJWARP_CAPACITY)
                          for _ in range(groups)]
            self.main = wp.Stream(dev)
            self.side = [wp.Stream(dev) for _ in range(groups)]
        self.graph = None

    def load(self, state: dict[str, torch.Tensor]) -> None:
        for k, d in enumerate(self.datas):
            rows = slice(k * self.per, (k + 1) * self.per)
            for name in STATE:
                self.wp.to_torch(getattr(d, name)).copy_(state[name][rows])
        torch.cuda.synchronize()

    def _substeps(self) -> None:
        wp = self.wp
        fork = self.main.record_event()
        for s, d in zip(self.side, self.datas):
            s.wait_event(fork)
            with wp.ScopedStream(s, sync_enter=False):
                for _ in range(4):
                    self.mjw.step(self.m, d)
            self.main.wait_stream(s)

    def capture(self) -> None:
        wp = self.wp
        with wp.ScopedDevice(self.dev), wp.ScopedStream(self.main):
            self._substeps()  # load the modules outside the capture
            wp.synchronize_device(self.dev)
            with wp.ScopedCapture(self.dev, stream=self.main) as cap:
                self._substeps()
        self.graph = cap.graph

    def time(self, ticks: int) -> float:
        wp = self.wp
        with wp.ScopedDevice(self.dev):
            for _ in range(5):
                wp.capture_launch(self.graph, stream=self.main)
            wp.synchronize_device(self.dev)
            t0 = time.perf_counter()
            for _ in range(ticks):
                wp.capture_launch(self.graph, stream=self.main)
            wp.synchronize_device(self.dev)
            return time.perf_counter() - t0


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--num-envs", type=int, default=4096)
    p.add_argument("--groups", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--ticks", type=int, default=200)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--out", default=None)
    a = p.parse_args()
    if not torch.cuda.is_available():
        print("error: needs a CUDA device", file=sys.stderr)
        return 2
    import mujoco
    import mujoco_warp as mjw
    import warp as wp

    cfg = load_config("sac", "g1_walk_flat", "mjwarp", ["training.devices=[0]"])
    tick = build_collector_tick(cfg, a.num_envs, "cuda", cuda_graph=True, compile=False)
    tick.run(0, a.warmup)
    torch.cuda.synchronize()
    b = tick.env.backend
    state = {name: wp.to_torch(getattr(b._d, name)).clone() for name in STATE}
    mj_model = tick.env.task.mj_model()
    tick.release()
    del tick
    torch.cuda.empty_cache()
    mjd = mujoco.MjData(mj_model)
    mujoco.mj_forward(mj_model, mjd)
    dev = f"cuda:{torch.cuda.current_device()}"
    arms = {k: Arm(wp, mjw, mj_model, mjd, a.num_envs, k, dev) for k in a.groups}
    for arm in arms.values():
        arm.load(state)
        arm.capture()
    runs = []
    for rep in range(a.repeats):
        for k, arm in arms.items():
            arm.load(state)
            seconds = arm.time(a.ticks)
            r = {"groups": k, "repeat": rep, "num_envs": a.num_envs, "ticks": a.ticks,
                 "ms_per_tick": round(seconds * 1e3 / a.ticks, 4),
                 "physics_env_steps_per_s": round(a.num_envs * a.ticks / seconds, 1)}
            print(json.dumps(r), flush=True)
            runs.append(r)
    # the same start, the same worlds: every arm must end where the one-group arm ends
    ends = {}
    for k, arm in arms.items():
        arm.load(state)
        with wp.ScopedDevice(dev):
            for _ in range(10):
                wp.capture_launch(arm.graph, stream=arm.main)
            wp.synchronize_device(dev)
        ends[k] = torch.cat([wp.to_torch(d.qpos) for d in arm.datas])
    ref = ends[a.groups[0]]
    diff = {str(k): float((v - ref).abs().max()) for k, v in ends.items()}
    print(json.dumps({"max_abs_qpos_diff_after_10_steps_vs_groups_%d" % a.groups[0]: diff}), flush=True)
    emit({"command": " ".join(sys.argv), "gpu": torch.cuda.get_device_name(0), "runs": runs, "qpos_diff": diff}, a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
