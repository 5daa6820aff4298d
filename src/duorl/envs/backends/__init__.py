"""Batched simulator backends: `mujoco` (MuJoCo C on CPU threads) and `mjwarp` (MuJoCo Warp)."""
