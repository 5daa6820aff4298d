"""SAC learns pendulum_swingup through the real duo (spawned collector, mujoco backend), and
`duorl metrics` reads the run.

Budget: 1001 iterations of 16 envs (16k env steps, 7.6k updates) with the task's defaults, about
two and a half minutes on a 2-core CPU (sac: 142 s alone, 168 s in the suite). All 16 episodes of a batch start together and last 200 ticks,
so the return logged last is that of the 16 episodes that ended at tick 1000, played by the policy of
iterations 800-1000. Iteration k logs the collector statistics of tick k-1, so those episodes reach
the log at iteration 1001, the last one: the 1100 iterations this test ran before logged the same final
return (sac, seed 1: 159.92 both ways) and trained 99 iterations that no assertion read. Threshold: >= 80
(seed 1 measured 160 on the dev machine); a random policy scores about 3, a zero policy 0.04, a
hand-written swing-up controller 158.
"""

import json
import subprocess
import sys

import pytest

RETURN_THRESHOLD = 80.0
BUDGET_ITERATIONS = 1001  # the episodes that end at tick 1000 are logged at iteration 1001
# FlashSAC's cosine learning-rate decay spans algo.max_iterations * updates_per_step updates unless
# algo.lr_decay_updates says otherwise: pinned to the 1100 iterations (x 8 updates) this test used to
# run, the first 1001 iterations train exactly as those runs did
FLASH_LR_DECAY_UPDATES = 1100 * 8


@pytest.mark.slow
@pytest.mark.learning_run
def test_sac_learns_pendulum_swingup(tmp_path):
    run = tmp_path / "learn"
    cmd = [
        sys.executable, "-m", "duorl", "train", "--algo", "sac", "--task", "pendulum_swingup", "--sim", "mujoco",
        f"training.log_dir={run}", "training.progress=false", f"algo.max_iterations={BUDGET_ITERATIONS}",
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (run / "checkpoints" / "final.pt").is_file()
    assert (run / "run_config.json").is_file() and any((run / "tensorboard").iterdir())
    assert (run / "plots" / "learning_curves.png").stat().st_size > 10_000

    m = subprocess.run(
        [sys.executable, "-m", "duorl", "metrics", str(run), "--last", "100", "--json"],
        capture_output=True, text=True, timeout=120,
    )
    assert m.returncode == 0, m.stderr
    summary = json.loads(m.stdout)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    last = rows[-100:]
    returns = [row["Train/mean_episode_return"] for row in last if row.get("Train/mean_episode_return") is not None]
    assert summary["mean"]["Train/mean_episode_return"] == pytest.approx(sum(returns) / len(returns))
    # the last finished episodes of the run, not an average over the whole learning curve
    final_return = rows[-1]["Train/mean_episode_return"]
    print(f"final mean episode return {final_return:.1f}; mean over last 100 logged {summary['mean']['Train/mean_episode_return']:.1f}")
    assert final_return >= RETURN_THRESHOLD, final_return


@pytest.mark.slow
@pytest.mark.learning_run
@pytest.mark.parametrize("algo", ["flashsac", "warpsac"])
def test_flash_algorithms_learn_pendulum_swingup(tmp_path, algo):
    """FlashSAC and WarpSAC (age-biased replay) on the same task, budget and threshold as SAC, with the
    task's algo_by_name settings (one narrow block per network: cheaper per update than SAC here; the
    target critic at tau 0.1) and the learning-rate decay of an 1100-iteration run
    (FLASH_LR_DECAY_UPDATES). On the 2-core dev VM seed 1 ends at 109.8 (flashsac) and 144.2 (warpsac);
    across seeds 1-6 flashsac ends at 91.6-149.9 (benchmarks/2026-12-01_cpu_checks/README.md)."""
    run = tmp_path / algo
    cmd = [
        sys.executable, "-m", "duorl", "train", "--algo", algo, "--task", "pendulum_swingup", "--sim", "mujoco",
        f"training.log_dir={run}", "training.progress=false", f"algo.max_iterations={BUDGET_ITERATIONS}",
        f"algo.lr_decay_updates={FLASH_LR_DECAY_UPDATES}",
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    config = json.loads((run / "run_config.json").read_text())
    assert (config["algo"]["decay_step"] > 0) == (algo == "warpsac")
    final_return = rows[-1]["Train/mean_episode_return"]
    print(f"{algo}: final mean episode return {final_return:.1f}")
    assert final_return >= RETURN_THRESHOLD, final_return
