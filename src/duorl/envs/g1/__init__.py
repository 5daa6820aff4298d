"""The Unitree G1 (29 DoF): where its model comes from (assets), how training builds it (model)."""
