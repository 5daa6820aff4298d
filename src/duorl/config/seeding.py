"""Reproducible, independent seeds for every random stream of a run (docs/design.md §4).

One function serves the whole package: the application derives the learner's, the envs', the
exploration's and the replay sampler's seeds from `training.seed`, and a learner derives its own
init and sampling seeds from the one it is given. Under data parallel the model-init and learner
streams use rank 0 on every rank (identical networks and update noise), while envs, exploration and
replay sampling use the rank's own number (different data per rank).
"""

from __future__ import annotations

import numpy as np

STREAMS = {"learner": 0, "env": 1, "explore": 2, "replay": 3, "play": 4, "init": 5, "learner_sampling": 6}


def derive_seed(seed: int, stream: str, rank: int = 0) -> int:
    """A 32-bit seed for (seed, stream, rank): distinct streams and ranks never share a sequence."""
    return int(np.random.SeedSequence(seed, spawn_key=(STREAMS[stream], rank)).generate_state(1)[0])
