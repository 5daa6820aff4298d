"""The host cost of the whole-cycle graph's staleness check (graphs.graph_fingerprint), which runs
before every replay, ahead of the launch: this tree's against another graphs.py, interleaved, best of
7 rounds of 100 calls, on learners of the G1 walk dimensions (sac with symmetry, flashsac).

    git show 9bac856:src/duorl/gpu/graphs.py > /tmp/graphs_old.py   # round 4: one walk per module tree
    git show b540a09:src/duorl/gpu/graphs.py > /tmp/graphs_old.py   # round 5: the walk without named_modules
    OMP_NUM_THREADS=1 python benchmarks/scripts/graph_fingerprint_cpu.py /tmp/graphs_old.py

The output file has one block per round.
"""

import importlib.util
import sys
import time

from duorl import graphs as graphs_new
from duorl.cli.bench.learner import learner_fixture

spec = importlib.util.spec_from_file_location("graphs_old", sys.argv[1])
graphs_old = importlib.util.module_from_spec(spec)
sys.modules["graphs_old"] = graphs_old  # dataclasses look their module up
spec.loader.exec_module(graphs_old)

for algo, task in (("flashsac", None), ("sac", "g1_walk_flat")):
    fx = learner_fixture(algo, task, ["training.num_envs=64"], device="cpu")
    learner, sampler = fx.setup()
    learner.train_iteration(sampler.sample, 1)  # optimizer state exists, as at a capture
    best: dict[str, float] = {}
    for _ in range(7):
        for name, mod in (("old", graphs_old), ("new", graphs_new)):
            t = time.perf_counter()
            for _ in range(100):
                mod.graph_fingerprint(learner)
            best[name] = min(best.get(name, 1e9), (time.perf_counter() - t) / 100 * 1000)
    print(algo, "ms per call", {k: round(v, 3) for k, v in best.items()}, "new/old", round(best["new"] / best["old"], 3))
