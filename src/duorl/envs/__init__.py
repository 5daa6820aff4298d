"""Environments: the VecEnv contract (base), simulator backends, tasks, and the registry.

Import `duorl.envs.registry` for `make_vec_env` / `env_spec`; importing this package stays cheap
(no simulator is imported until a backend is built).
"""
