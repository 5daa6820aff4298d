"""MetricsWriter: metrics.jsonl, TensorBoard and, with training.wandb=true, Weights & Biases, same rows.

W&B is an optional extra that CI does not install (about 100 MB and 11 s more per fresh install, for one
feature): these tests put a small fake `wandb` package on sys.path that records what duorl calls. The real
package's offline mode was checked by hand (docs/guide.md, Weights & Biases)."""

from __future__ import annotations

import json
import math
import sys
import textwrap
from pathlib import Path
from typing import Any, Iterator

import pytest

from duorl.telemetry.writers import MetricsWriter

FAKE_WANDB = textwrap.dedent('''
    """A stand-in for wandb: records init's arguments, logged rows and finish."""
    CALLS = []

    class _Run:
        def log(self, values, step=None):
            CALLS.append(("log", dict(values), step))

        def finish(self):
            CALLS.append(("finish",))

    def init(**kwargs):
        if kwargs.get("mode") == "online" and kwargs.get("project") == "no-login":
            raise RuntimeError("No API key configured. Use `wandb login` to log in.")
        CALLS.append(("init", kwargs))
        return _Run()
''')


@pytest.fixture
def fake_wandb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[Any, ...]]]:
    pkg = tmp_path / "fakes" / "wandb"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(FAKE_WANDB)
    monkeypatch.syspath_prepend(str(pkg.parent))
    monkeypatch.delitem(sys.modules, "wandb", raising=False)
    import wandb  # the fake

    yield wandb.CALLS
    sys.modules.pop("wandb", None)


def _config(**training: Any) -> dict[str, Any]:
    return {"training": {"wandb": True, "wandb_project": "duorl-test", "wandb_mode": "offline", **training},
            "algo": {"name": "sac"}}


def test_wandb_gets_the_rows_tensorboard_gets(tmp_path: Path, fake_wandb: list[tuple[Any, ...]]) -> None:
    run = tmp_path / "runs" / "pendulum_swingup-sac-1"
    run.mkdir(parents=True)
    # train.py writes run_config.json before it creates the writer: that config switches W&B on
    (run / "run_config.json").write_text(json.dumps(_config()))
    w = MetricsWriter(run, tensorboard=False)
    w.write(1, 16, 0.5, {"Perf/env_steps_per_s": 32.0, "Loss/critic": math.nan})
    w.write(2, 32, 1.0, {"Perf/env_steps_per_s": 30.0, "Loss/critic": 2.5})
    w.close()
    (kind, init), *rest = fake_wandb
    assert kind == "init" and init["project"] == "duorl-test" and init["mode"] == "offline"
    assert init["name"] == run.name and init["dir"] == str(run)  # offline files stay with the run
    assert init["config"] == _config()
    # the canonical names, stepped by env steps as in TensorBoard; a non-finite value dropped as there
    assert rest == [("log", {"Perf/env_steps_per_s": 32.0}, 16),
                    ("log", {"Perf/env_steps_per_s": 30.0, "Loss/critic": 2.5}, 32), ("finish",)]
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["env_steps"] for r in rows] == [16, 32] and rows[0]["Loss/critic"] is None


def test_no_wandb_unless_asked(tmp_path: Path, fake_wandb: list[tuple[Any, ...]]) -> None:
    MetricsWriter(tmp_path, tensorboard=False, config=_config(wandb=False)).close()
    MetricsWriter(tmp_path, tensorboard=False).close()  # no run_config.json: plain files
    assert fake_wandb == []


def test_a_failed_wandb_init_is_one_config_error(tmp_path: Path, fake_wandb: list[tuple[Any, ...]]) -> None:
    from duorl.config.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        MetricsWriter(tmp_path, tensorboard=False, config=_config(wandb_mode="online", wandb_project="no-login"))
    e = info.value
    assert e.key == "training.wandb_mode" and "No API key" in str(e) and "training.wandb_mode=offline" in e.fix
    assert "\n" not in str(e)


def test_training_wandb_needs_the_extra_before_anything_is_built(monkeypatch: pytest.MonkeyPatch,
                                                                 fake_wandb: list[tuple[Any, ...]]) -> None:
    import duorl.config.extras as extras
    from duorl.config.errors import ConfigError
    from duorl.cli.configure import load_config

    cfg = load_config("sac", "pendulum_swingup", "mujoco", ["training.wandb=true", "training.wandb_mode=offline"])
    assert cfg.training.wandb and fake_wandb == []  # found on sys.path, not imported by the check
    with pytest.raises(ConfigError) as info:
        load_config("sac", "pendulum_swingup", "mujoco", ["training.wandb_mode=offlin"])
    assert info.value.key == "training.wandb_mode" and "online, offline" in info.value.allowed
    monkeypatch.setattr(extras, "wandb_installed", lambda: False)
    with pytest.raises(ConfigError) as info:
        load_config("sac", "pendulum_swingup", "mujoco", ["training.wandb=true"])
    assert info.value.key == "training.wandb" and "pip install 'duorl[wandb]'" in info.value.fix


def test_online_wandb_without_a_login_is_refused_before_anything_is_built(monkeypatch, tmp_path) -> None:
    """Issue #39: training.wandb=true without a login left a half run directory. Now config loading refuses
    it (no netrc entry, no WANDB_API_KEY); a login in the netrc file, the key, or offline mode passes."""
    import duorl.config.extras as extras
    from duorl.config.errors import ConfigError
    from duorl.cli.configure import load_config

    monkeypatch.setattr(extras, "wandb_installed", lambda: True)
    for var in ("WANDB_API_KEY", "WANDB_MODE", "WANDB_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    netrc_file = tmp_path / "netrc"
    monkeypatch.setenv("NETRC", str(netrc_file))
    online = ["training.wandb=true", f"training.log_dir={tmp_path / 'run'}"]
    with pytest.raises(ConfigError) as info:
        load_config("sac", "pendulum_swingup", "mujoco", online)
    assert info.value.key == "training.wandb_mode" and "wandb login" in info.value.fix
    assert "training.wandb_mode=offline" in info.value.fix and not (tmp_path / "run").exists()
    netrc_file.write_text("machine api.wandb.ai\n  login user\n  password 0123456789abcdef\n")
    netrc_file.chmod(0o600)
    assert load_config("sac", "pendulum_swingup", "mujoco", online).training.wandb
    netrc_file.unlink()
    monkeypatch.setenv("WANDB_API_KEY", "0123456789abcdef")
    assert load_config("sac", "pendulum_swingup", "mujoco", online).training.wandb
    monkeypatch.delenv("WANDB_API_KEY")
    assert load_config("sac", "pendulum_swingup", "mujoco", [*online, "training.wandb_mode=offline"]).training.wandb
