"""`bench learner --profile` on a GPU (pytest -m cuda): kernels are seen in graph replays and eager
iterations, the GEMM rate is computed, and eager launches are traced to their op."""

from __future__ import annotations

import pytest
import torch

from duorl.cli.bench.learner import run_learner_bench

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]


def test_profile_of_a_small_sac_learner() -> None:
    overrides = ["training.num_envs=64", "algo.batch_size=256", "algo.updates_per_step=2",
                 "algo.actor_hidden_dims=[64]", "algo.critic_hidden_dims=[64]", "algo.algo_params.torch_compile=false"]
    r = run_learner_bench("sac", None, overrides, iters=3, warmup=1, device="cuda", replay_ticks=4, profile_iters=2)
    for arm in ("graph", "eager"):
        p = r["profile"][arm]
        assert "error" not in p, p
        assert p["kernels_per_iteration"] > 10 and p["busy_ms_per_iteration"] > 0
        assert p["busy_ms_per_iteration"] <= p["span_ms_per_iteration"] + 1e-6
        assert p["gemm"]["tflop_per_iteration"] > 0 and p["gemm"]["achieved_tflops"] > 0
        assert "gemm" in p["by_kind"] and "optimizer" in p["by_kind"]
    # eager launches name their host op; a graph replay launches its kernels at once, so only the few
    # launched outside it (H200: 4 fills of 0.003 ms per sac iteration) have one
    assert any(s["op"].startswith("aten::") for s in r["profile"]["eager"]["top_sources"])
    graph = r["profile"]["graph"]
    assert sum(s["ms_per_iteration"] for s in graph.get("top_sources", [])) < 0.2 * graph["busy_ms_per_iteration"]
    # the host's part of a replayed iteration: the staleness check and the launch, within the iteration
    host, launch = r["graph_host_ms_per_iteration"], r["graph_launch_ms"]
    assert 0 < launch["median"] <= r["graph_ms_per_iteration"]["p90"]
    assert 0 < host["min"] <= r["graph_ms_per_iteration"]["p90"]
