"""What a resumed run of an mjlab task starts over: the state mjlab keeps in its env, which duorl's
checkpoint does not hold (MjlabVecEnv.state_dict is None: a resumed run starts new episodes).

Read from the task's configuration (nothing built): its curriculum terms (mjlab's velocity stages and
reward-weight schedules read the env's step counter, `common_step_counter`, which a new env starts at 0;
the terrain curriculum's levels start again at the generator's initial levels) and motion commands that
sample their start frames adaptively (from failure counts per clip bin, which start again uniform).
`duorl train` prints each line as a warning when it resumes, and the manifest's `resumed_from.restarts`
keeps them.
"""

from __future__ import annotations

from typing import Any

from duorl.envs.mjlab.family import PREFIX


def restarts(task_id: str, task_cfg: Any) -> list[str]:
    """One line per piece of mjlab state a resumed run of `task_id` starts over ([]: none)."""
    from duorl.envs.mjlab.loader import registry

    cfg = registry().load_env_cfg(task_id)
    name = PREFIX + task_id
    out = []
    terms = [n for n, t in (cfg.curriculum or {}).items() if t is not None]
    if terms:
        terrain = "terrain_levels" in terms or any("terrain" in n for n in terms)
        out.append(f"{name}'s curriculum ({', '.join(terms)}) starts over: mjlab keeps its state in the env "
                   "(the env step counter its stages read" + (", each env's terrain level" if terrain else "") +
                   "), which duorl's checkpoint does not hold, so the resumed run starts at mjlab's first stage"
                   + (" and initial terrain levels" if terrain else "") + " (docs/tasks.md, Resume)")
    adaptive = [n for n, c in (cfg.commands or {}).items() if getattr(c, "sampling_mode", None) == "adaptive"]
    if adaptive:
        out.append(f"{name}'s command {', '.join(adaptive)} samples start frames from the failures it counted per "
                   "part of the clip; the counts start over (uniform) in the resumed run (docs/tasks.md, Resume)")
    return out
