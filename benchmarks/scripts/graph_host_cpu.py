"""The host work of a whole-cycle graph replay besides the launch: `WholeCycleGraph.train_iteration`
driven with a no-op graph on the CPU (the staleness check, the cycle key, the host counters), this
tree's graphs.py against another, interleaved, best of 7 rounds of 100 calls, on learners of the G1 walk
dimensions (flashsac, sac with symmetry).

    git show b540a09:src/duorl/gpu/graphs.py > /tmp/graphs_old.py
    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/scripts/graph_host_cpu.py /tmp/graphs_old.py
"""

import time, sys, importlib.util
from duorl.cli.bench.learner import learner_fixture
def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path); mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod; spec.loader.exec_module(mod); return mod
mods = {"old": load(sys.argv[1], "g_old"), "new": load("src/duorl/gpu/graphs.py", "g_new")}
class FakeGraph:
    def replay(self): pass
for algo, task in (("flashsac", None), ("sac", "g1_walk_flat")):
    fx = learner_fixture(algo, task, ["training.num_envs=64"], device="cpu")
    learner, sampler = fx.setup()
    out = learner.train_iteration(sampler.sample, fx.num_updates)
    best = {}
    wrap = {}
    for name, g in mods.items():
        w = object.__new__(g.WholeCycleGraph)
        w.learner = learner; w._graphs = {}; w.replays = 0; w._cycles=set(); w.last_invalidation=None
        key = (learner.cycle_key(fx.num_updates), fx.num_updates, g._callable_id(sampler.sample))
        w._graphs[key] = g._Captured(FakeGraph(), out, sampler.sample)
        w._fingerprint = g.graph_fingerprint(learner)
        wrap[name] = w
    for _ in range(7):
        for name, w in wrap.items():
            t = time.perf_counter()
            for _ in range(100):
                w.train_iteration(sampler.sample, fx.num_updates)
            best[name] = min(best.get(name, 1e9), (time.perf_counter() - t) / 100 * 1e3)
    assert all(w.last_invalidation is None for w in wrap.values())
    print(algo, "host ms per replay", {k: round(v, 3) for k, v in best.items()}, "new/old", round(best["new"]/best["old"], 3))
