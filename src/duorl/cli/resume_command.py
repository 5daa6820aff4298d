"""`duorl resume RUN [key=value ...]`: continue a run, as every trainer's users expect, without retyping
its command line. It is `duorl train` with the run's algorithm, task and simulator, every key the run set
differently from their defaults (read from RUN/run_config.json), `training.resume=RUN`, and then the
given overrides (a resumed run may change only the keys docs/configuration.md marks 'may differ';
training.resume's checks, cli/resume.py, refuse the rest). It writes a new run directory, as
training.resume does. The equivalent `duorl train` command is printed first."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from duorl.config.errors import ConfigError, format_value

_FIX = "give a run directory that `duorl train` wrote (it prints 'duorl: run directory ...')"
# chosen by --algo/--task/--sim, or what a resume must set anew: never carried over
_NOT_CARRIED = ("algo.name", "task.name", "sim.name", "training.log_dir", "training.resume")


def _override_value(value: Any) -> str:
    """`value` as a key=value override reads it back (config/load.py parses overrides with OmegaConf: a
    text it would read as another type, "null", "1e-05", is quoted)."""
    if isinstance(value, str):
        try:
            same = OmegaConf.to_container(OmegaConf.from_dotlist([f"k={value}"]))["k"] == value
        except Exception:  # noqa: BLE001 - any text OmegaConf cannot parse as it is goes quoted
            same = False
        return value if same else json.dumps(value)
    if isinstance(value, float):
        return repr(value)
    return format_value(value)


def _saved_config(run: str) -> dict[str, Any]:
    path = Path(run).expanduser()
    if not path.is_dir():
        problem = "is not a directory" if path.exists() else "does not exist"
        raise ConfigError("RUN", run, problem, "a run directory", _FIX)
    cfg_path = path / "run_config.json"
    try:
        data = json.loads(cfg_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError("RUN", run, f"has no run_config.json (not a run directory, or a run killed before it "
                                      "wrote its configuration)", "a run directory",
                          f"{_FIX}; to continue from a checkpoint file, use duorl train ... training.resume=FILE") from None
    except (OSError, ValueError) as e:
        raise ConfigError("RUN", run, f"{cfg_path} cannot be read ({type(e).__name__}: {e})", "a run directory",
                          _FIX) from None
    if not isinstance(data, dict) or not all(isinstance(data.get(s), dict) for s in ("algo", "task", "sim")):
        raise ConfigError("RUN", run, f"{cfg_path} is not a duorl configuration", "a run directory", _FIX)
    return data


def resume_argv(run: str, overrides: list[str]) -> list[str]:
    """The `duorl train` arguments that continue RUN with `overrides`. ConfigError (exit 2) if RUN is no
    run directory; everything else is checked as `duorl train ... training.resume=RUN` checks it."""
    from duorl.cli.configure import load_config
    from duorl.config.keys import flatten
    from duorl.config.load import config_to_dict

    saved = _saved_config(run)
    algo, task, sim = saved["algo"].get("name"), saved["task"].get("name"), saved["sim"].get("name")
    defaults = flatten(config_to_dict(load_config(str(algo), str(task), str(sim), [], probe_devices=False)))
    carried = [f"{k}={_override_value(v)}" for k, v in flatten(saved).items()
               if k not in _NOT_CARRIED and k in defaults and defaults[k] != v]
    return ["train", "--algo", str(algo), "--task", str(task), "--sim", str(sim), *carried,
            f"training.resume={run}", *overrides]


def say_command(argv: list[str]) -> None:
    print(f"duorl: resume: duorl {shlex.join(argv)}", flush=True)


__all__ = ["resume_argv", "say_command"]
