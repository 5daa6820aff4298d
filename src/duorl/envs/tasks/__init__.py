"""Tasks: what an environment observes, rewards and resets, written against batched tensors only."""
