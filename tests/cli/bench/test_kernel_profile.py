"""bench/kernel_profile.py on the CPU: kernel classification, iteration split, busy/idle arithmetic, the
GEMM FLOP count, and `--profile` refused without CUDA."""

from __future__ import annotations

import pytest

from duorl.cli.bench.kernel_profile import (
    KINDS, Kernel, classify, gemm_flop_per_iteration, kernels_by_iteration, summarize)
from duorl.cli.bench.learner import learner_fixture
from duorl.cli.main import main


@pytest.mark.parametrize("name,kind", [
    ("nvjet_tst_128x256_64x4_2x1_v_bz_coopA_TNT", "gemm"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "gemm"),
    ("void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8>", "gemm"),
    ("triton_red_fused_native_layer_norm_native_layer_norm_backward_12", "normalisation"),
    ("triton_per_fused__log_softmax_mul_neg_sum_3", "reduction"),
    ("triton_poi_fused_add_mul_silu_7", "elementwise"),
    ("triton_poi_fused__to_copy_add_div_expand_mul_pow_sub_unsqueeze_15", "elementwise"),
    ("triton_red_fused_add_constant_pad_nd_expand_gather_mul_slice_sub_sum_15", "reduction"),
    ("triton_tem_fused_mm_4", "gemm"),
    ("void at::native::(anonymous namespace)::fused_adam_kernel<float>", "optimizer"),
    ("void at::native::multi_tensor_apply_kernel<at::native::LerpFunctor<float>>", "optimizer"),
    ("void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel<float, 4>", "sampling"),
    ("void at::native::index_elementwise_kernel<128, 4>", "indexing"),
    ("Memcpy DtoD (Device -> Device)", "copy"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>", "copy"),
    ("some_unknown_kernel", "other"),
])
def test_classify(name: str, kind: str) -> None:
    assert kind in KINDS and classify(name) == kind


def _trace() -> list[dict]:
    """Two iterations of host range + GPU kernels, plus noise the split must ignore."""
    ev = []
    for i, base in enumerate((0.0, 1000.0)):
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"duorl_profiled_iteration_{i}", "ts": base, "dur": 900.0})
        # gemm 100..200, overlapping elementwise 150..250 (another stream), gap, adam 300..320
        ev += [{"ph": "X", "cat": "kernel", "name": "nvjet_gemm", "ts": base + 100, "dur": 100.0},
               {"ph": "X", "cat": "kernel", "name": "triton_poi_fused_silu", "ts": base + 150, "dur": 100.0},
               {"ph": "X", "cat": "kernel", "name": "fused_adam_kernel", "ts": base + 300, "dur": 20.0},
               {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": base + 10, "dur": 5.0}]
    ev.append({"ph": "X", "cat": "kernel", "name": "outside", "ts": 5000.0, "dur": 1.0})
    return ev


def test_split_and_summary_arithmetic() -> None:
    per_it = kernels_by_iteration(_trace(), 2)
    assert [len(ks) for ks in per_it] == [3, 3]
    s = summarize(per_it, gemm_flop=2e9)
    # span 100..320 = 220 us; busy = 100..250 (150) + 20 = 170 us; idle 50 us
    assert s["kernels_per_iteration"] == 3
    assert s["span_ms_per_iteration"] == pytest.approx(0.22)
    assert s["busy_ms_per_iteration"] == pytest.approx(0.17)
    assert s["idle_ms_per_iteration"] == pytest.approx(0.05)
    assert s["gaps_us"]["largest"] == pytest.approx(50.0) and s["gaps_us"]["over_10us_per_iteration"] == 1
    assert s["by_kind"]["gemm"]["ms_per_iteration"] == pytest.approx(0.1)
    assert s["by_kind"]["optimizer"]["kernels_per_iteration"] == 1
    assert sum(k["share_of_kernel_time"] for k in s["by_kind"].values()) == pytest.approx(1.0, abs=1e-3)
    # 2 GFLOP in 0.1 ms = 20 TFLOP/s
    assert s["gemm"]["achieved_tflops"] == pytest.approx(20.0)
    assert s["kernels"][0]["name"] in ("nvjet_gemm", "triton_poi_fused_silu") and len(s["kernels"]) == 3


def test_kernels_are_traced_to_their_host_op_and_compiled_region() -> None:
    ev = [{"ph": "X", "cat": "user_annotation", "name": "duorl_profiled_iteration_0", "ts": 0.0, "dur": 900.0},
          {"ph": "X", "cat": "cpu_op", "name": "Torch-Compiled Region: 0/1", "ts": 10.0, "dur": 50.0, "tid": 1},
          {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 20.0, "dur": 5.0, "tid": 1, "args": {"External id": 7}},
          {"ph": "X", "cat": "cpu_op", "name": "aten::copy_", "ts": 80.0, "dur": 5.0, "tid": 1, "args": {"External id": 8}},
          {"ph": "X", "cat": "kernel", "name": "nvjet_gemm", "ts": 100.0, "dur": 10.0, "args": {"External id": 7}},
          {"ph": "X", "cat": "kernel", "name": "direct_copy_kernel", "ts": 120.0, "dur": 30.0, "args": {"External id": 8}}]
    (ks,) = kernels_by_iteration(ev, 1)
    assert [(k.op, k.region) for k in ks] == [("aten::mm", "Torch-Compiled Region: 0/1"), ("aten::copy_", "eager")]
    top = summarize([ks])["top_sources"]
    assert top[0] == {"kind": "copy", "op": "aten::copy_", "region": "eager", "ms_per_iteration": 0.03,
                      "calls_per_iteration": 1.0}


def test_split_needs_every_range_and_kernels() -> None:
    with pytest.raises(RuntimeError, match="expected 3"):
        kernels_by_iteration(_trace(), 3)
    with pytest.raises(RuntimeError, match="no GPU kernels"):
        summarize([[], []])
    assert Kernel("a", 1.0, 2.0).end_us == 3.0


def test_gemm_flops_match_the_network_arithmetic() -> None:
    """sac with 1 update per iteration and the actor every 2nd: the mean over the 2-iteration cycle,
    derived by hand (2 FLOP per multiply-add; a layer's input gradient only where the input needs one)."""
    overrides = ["training.num_envs=8", "algo.batch_size=32", "algo.updates_per_step=1", "algo.policy_frequency=2",
                 "algo.actor_hidden_dims=[16]", "algo.critic_hidden_dims=[8]", "algo.num_atoms=11"]
    fx = learner_fixture("sac", None, overrides, "cpu", replay_ticks=4)
    b, a_obs, c_in, act, h, atoms, members = 32, 98, 101 + 29, 29, 8, 11, 2
    mm = lambda m, k, n: 2 * m * k * n  # noqa: E731
    critic_l1, critic_l2 = members * mm(b, c_in, h), members * mm(b, h, atoms)
    actor_trunk, actor_heads = mm(b, a_obs, 16), 2 * mm(b, 16, act)
    critic_fwd, actor_fwd = critic_l1 + critic_l2, actor_trunk + actor_heads
    # critic update: target forward, next-action actor forward, critic forward, critic backward (weight
    # gradients of both layers, the input gradient of the second; the first layer's input is data)
    critic_update = critic_fwd + actor_fwd + critic_fwd + (critic_l1 + 2 * critic_l2)
    # actor update: actor forward, critic forward, critic backward to the action only (input gradients),
    # actor backward (weight gradients, the heads' input gradient; the trunk's input is data)
    actor_update = actor_fwd + critic_fwd + critic_fwd + (actor_trunk + 2 * actor_heads)
    assert gemm_flop_per_iteration(fx, 1) == (2 * critic_update + actor_update) / 2


def test_profile_is_refused_without_cuda(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "learner", "--profile", "2", "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert "--profile" in err and "GPU" in err
    assert main(["bench", "learner", "--profile", "-1"]) == 2
