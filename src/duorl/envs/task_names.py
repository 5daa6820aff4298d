"""The names of the tasks the envs registry builds, without importing it: validation and `--help`
list them before torch and the simulators are loaded (envs/registry.py checks it builds exactly these)."""

TASKS: tuple[str, ...] = ("pendulum_swingup", "g1_walk_flat", "g1_motion_tracking")
