"""What `duorl train` runs once training completed, as configured: the ONNX and safetensors export
(training.export_onnx, cli/export.py, imported only then) and the deterministic post-train play
(training.no_play unset, cli/play.py); their results go into run_summary.json.
"""

from __future__ import annotations

from typing import Any

from duorl.cli.play import evaluate
from duorl.cli.run_context import RunContext


def after_training(run: RunContext) -> dict[str, Any]:
    """Export and play, as configured: {"export": ..., "play": ...} for what ran."""
    tr, run_dir = run.cfg.training, run.run_dir
    assert run_dir is not None and run.checked is not None
    out: dict[str, Any] = {}
    if tr.export_onnx:
        from duorl.cli.export import export_policy

        out["export"] = export_policy(run.learner.actor, run.checked.spec.actor_obs_dim, run_dir / "export")
        print(f"duorl: exported {out['export']['onnx']} and {out['export']['safetensors']}", flush=True)
    if not tr.no_play:
        r = evaluate(run_dir, episodes=8)
        out["play"] = r.__dict__
        print(f"duorl: play: mean return {r.mean_return:.3f} over {r.episodes} episodes (deterministic)", flush=True)
    return out
