"""Data parallel on the GPU (`pytest -m cuda`): NCCL, the DP whole-cycle graph, and a DP run at world size 1.

Each test runs in its own process (a process group per process; a failed capture must not disturb
the others). At world size 1 the all-reduce is NCCL's own path; world size 2 belongs to the
multi-GPU validation runs (benchmarks/).
- DP graph vs DP eager: bitwise-equal losses, parameters and optimizer state over 6 iterations (the
  first captures, the rest only replay), parameters changing on every one; the same for a NaN update
  skipped inside the graph.
- The join matters: the reduction on a side stream that does not fork from the capture stream fails
  the capture with GraphCaptureError naming the stream.
- A capture error injected on one rank ends every rank within 30 s; teardown (graph released, then the
  process group destroyed) exits in under 10 s.
- `training.devices=[0]` through the launcher (world size 1) equals the plain single-GPU run bitwise.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]

ROOT = Path(__file__).resolve().parents[2]

PRELUDE = textwrap.dedent(
    """
    import datetime, os, sys, tempfile, time
    import torch, torch.distributed as dist
    from duorl.distributed.grad_sync import AllReduceSynchronizer
    from duorl.gpu.graphs import GraphCaptureError, WholeCycleGraph
    from tests.gpu.test_graphs_cuda import _pair, _params, _assert_bitwise, ITERATIONS

    store = tempfile.mkdtemp()
    dist.init_process_group("nccl", init_method=f"file://{store}/s", rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=60), device_id=torch.device("cuda:0"))

    def dp_pair(algo, wire="float32", fork=True, **kw):
        cfg, eager, graphed, re, rg = _pair(algo, **kw)
        for learner in (eager, graphed):
            learner.set_synchronizer(AllReduceSynchronizer(dist.group.WORLD, 1, torch.device("cuda"), wire,
                                                           fork_stream=fork))
        return cfg, eager, graphed, re, rg
    """
)


def _script(body: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(body)], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=ROOT)


def test_dp_graph_matches_dp_eager_bitwise_with_a_skipped_update():
    r = _script(
        """
        for algo, compiled, wire in (("sac", False, "float32"), ("flashsac", True, "float32"), ("sac", True, "bfloat16")):
            cfg, eager, graphed, re, rg = dp_pair(algo, wire, compiled=compiled)
            poisons = [l.poison_losses(cfg.updates_per_step) for l in (eager, graphed)]
            graph = WholeCycleGraph(graphed, extra_generators=[rg.sampler.generator], agree=lambda problem: None)
            n = cfg.updates_per_step
            for k in range(ITERATIONS):
                before = _params(graphed)
                if k == 3:  # an invalid first update, inside a replay
                    for p in poisons:
                        p[0] = float("nan")
                re.feed(eager, k); rg.feed(graphed, k)
                mg = graph.train_iteration(rg.sampler.sample, n)
                me = eager.train_iteration(re.sampler.sample, n)
                torch.cuda.synchronize()
                for p in poisons:
                    p.zero_()
                _assert_bitwise(eager, graphed, me, mg, f"{algo} iteration {k}")
                after = _params(graphed)
                changed = [not torch.equal(a, b) for a, b in zip(before, after) if a.numel() > 1]
                # every parameter moves, except in the iteration whose first update was skipped (its actor
                # step may have been that update's)
                assert all(changed) if k != 3 else any(changed), (algo, k)
            assert float(graphed.skipped_updates) == 1.0 and float(mg["Train/skipped_updates"]) == 1.0
            assert graph.replays == ITERATIONS and graph.captures <= 2, graph.state()
            graph.release()
            print("OK", algo, wire, graph.state())
        dist.destroy_process_group()
        """
    )
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    assert r.stdout.count("OK") == 3, r.stdout


def test_a_reduction_stream_not_forked_from_the_capture_stream_fails_the_capture_naming_it():
    r = _script(
        """
        cfg, eager, graphed, re, rg = dp_pair("sac", fork=False)
        graph = WholeCycleGraph(graphed, extra_generators=[rg.sampler.generator])
        rg.feed(graphed, 0)
        try:
            graph.train_iteration(rg.sampler.sample, cfg.updates_per_step)
            print("CAPTURED")
        except GraphCaptureError as e:
            print("ERROR:", e)
        """
    )
    out = r.stdout + r.stderr
    assert "CAPTURED" not in out, out[-3000:]
    assert "ERROR: capturing SACLearner.train_iteration as a whole-cycle CUDA graph failed" in out, out[-3000:]
    assert "side stream" in out and "does not fork from the capture stream" in out and "forked_stream" in out, out[-3000:]


def test_teardown_releases_the_graph_then_the_process_group_and_exits_quickly():
    r = _script(
        """
        cfg, eager, graphed, re, rg = dp_pair("flashsac")
        graph = WholeCycleGraph(graphed, extra_generators=[rg.sampler.generator])
        for k in range(3):
            rg.feed(graphed, k)
            graph.train_iteration(rg.sampler.sample, cfg.updates_per_step)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        graph.release()
        dist.destroy_process_group()
        print("TEARDOWN_S", time.perf_counter() - t0, flush=True)
        print("T_EXIT", time.time(), flush=True)
        """
    )
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    t_exit = float(r.stdout.split("T_EXIT")[1].split()[0])
    assert float(r.stdout.split("TEARDOWN_S")[1].split()[0]) < 10
    assert time.time() - t_exit < 10  # the interpreter's own exit after the teardown


def _train_cmd(run_dir: Path, *extra: str) -> list[str]:
    """A short pendulum run on the GPU (mjwarp, both graphs, compiled learner): the run's whole path at a
    fraction of a G1 run's build and compile time."""
    return [sys.executable, "-m", "duorl", "train", "--algo", "sac", "--task", "pendulum_swingup", "--sim", "mjwarp",
            f"training.log_dir={run_dir}", "training.num_envs=512", "algo.batch_size=1024", "algo.max_iterations=30",
            "algo.learning_starts=2", "algo.save_interval=1000", "training.log_interval=1", "training.progress=false",
            "training.torch_threads=0", *extra]


def _train(run_dir: Path, *extra: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(_train_cmd(run_dir, *extra), capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def test_one_gpu_through_the_launcher_equals_the_plain_run_bitwise(tmp_path):
    from duorl.runtime.checkpoint import load_checkpoint
    from tests.runtime.test_duo_protocol import _assert_bitwise_equal

    plain, launched = tmp_path / "plain", tmp_path / "launched"
    r = _train(plain, "training.devices=[0]")
    assert r.returncode == 0, r.stderr[-4000:]
    r = _train(launched, "training.devices=[0]", "training.data_parallel=true")
    assert r.returncode == 0, r.stderr[-4000:]
    s = json.loads((launched / "run_summary.json").read_text())
    m = s["runtime_manifest"]
    assert m["world_size"] == 1 and m["data_parallel"] and m["whole_cycle_cuda_graph"]["dp_graph"]
    assert m["whole_cycle_cuda_graph"]["active"] and m["ranks"][0]["device_uuid"].startswith("GPU-")
    a, b = load_checkpoint(plain / "checkpoints" / "final.pt"), load_checkpoint(launched / "checkpoints" / "final.pt")
    _assert_bitwise_equal(a["learner"], b["learner"])


def test_a_capture_error_on_one_rank_ends_every_rank(tmp_path):
    """The failing rank's capture error is agreed on by every rank; the run ends within 30 s of it."""
    world = min(torch.cuda.device_count(), 2)
    devices = ",".join(str(i) for i in range(world))
    cmd = _train_cmd(tmp_path / "capture", f"training.devices=[{devices}]", "training.data_parallel=true",
                     f"debug.fail_capture_rank={world - 1}")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    seen, lines = None, []
    assert proc.stderr is not None
    for line in proc.stderr:
        lines.append(line)
        if seen is None and f"capture failed on rank {world - 1}" in line:
            seen = time.monotonic()
    proc.wait(timeout=60)
    err = "".join(lines)
    assert seen is not None, err[-4000:]
    assert time.monotonic() - seen < 30
    assert proc.returncode == 1, err[-4000:]
    assert "injected for a test" in err
    assert json.loads((tmp_path / "capture" / "run_summary.json").read_text())["status"] == "failed"
