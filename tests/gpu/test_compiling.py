"""Where compiled code is cached between runs (duorl.gpu.compiling): torch's caches move out of /tmp into
duorl's cache unless the user named a place, Warp's path is predicted as Warp resolves it, the run
manifest records them, docs/guide.md names the same paths, and a second process hits the FX graph cache
the first one filled."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from duorl.gpu import compiling

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "guide.md"
SET_BY_US = ("TORCHINDUCTOR_CACHE_DIR",)
LEFT_ALONE = ("TRITON_CACHE_DIR", "WARP_CACHE_PATH")


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No cache variable set, HOME in tmp_path (a pytest process may already hold torch's /tmp default)."""
    for var in (*SET_BY_US, *LEFT_ALONE, "DUORL_CACHE_DIR", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path


def test_unset_caches_go_under_duorls_cache_root(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = clean_env / "home"
    dirs = compiling.use_persistent_compile_caches()
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(home / ".cache" / "duorl" / "compile" / "torchinductor")
    assert dirs["torchinductor"] == os.environ["TORCHINDUCTOR_CACHE_DIR"]
    assert dirs["triton"] == os.path.join(dirs["torchinductor"], "triton")
    assert all(v not in os.environ for v in LEFT_ALONE)  # Triton follows torch's directory; Warp keeps its own

    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(clean_env / "xdg"))
    compiling.use_persistent_compile_caches()
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(clean_env / "xdg" / "duorl" / "compile" / "torchinductor")

    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")
    monkeypatch.setenv("DUORL_CACHE_DIR", str(clean_env / "mine"))
    compiling.use_persistent_compile_caches()
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(clean_env / "mine" / "compile" / "torchinductor")


def test_a_variable_the_user_set_is_never_overridden(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUORL_CACHE_DIR", str(clean_env / "mine"))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(clean_env / "users_inductor"))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(clean_env / "users_triton"))
    monkeypatch.setenv("WARP_CACHE_PATH", str(clean_env / "users_warp"))
    # a process that initialised warp reports warp's own directory: as a fresh process, this one has not
    monkeypatch.delitem(sys.modules, "warp", raising=False)
    dirs = compiling.use_persistent_compile_caches()
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(clean_env / "users_inductor")
    assert os.environ["TRITON_CACHE_DIR"] == str(clean_env / "users_triton")
    assert dirs["torchinductor"] == str(clean_env / "users_inductor")
    assert dirs["triton"] == str(clean_env / "users_triton")
    assert Path(dirs["warp"]).parent == clean_env / "users_warp"


def test_a_cache_root_that_cannot_be_created_keeps_torchs_default(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (clean_env / "a_file").write_text("", encoding="utf-8")
    monkeypatch.setenv("DUORL_CACHE_DIR", str(clean_env / "a_file" / "cache"))
    dirs = compiling.use_persistent_compile_caches()
    assert "TORCHINDUCTOR_CACHE_DIR" not in os.environ
    assert dirs["torchinductor"] == compiling.torch_default_inductor_dir()


def test_torchs_default_is_computed_as_torch_computes_it(clean_env: Path) -> None:
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    assert compiling.torch_default_inductor_dir() == default_cache_dir()


def test_the_documented_paths_are_the_ones_used() -> None:
    guide = GUIDE.read_text(encoding="utf-8")
    section = guide.split("\n## Compile caches", 1)[1].split("\n## ", 1)[0]
    for text in ("~/.cache/duorl/compile/torchinductor", "$DUORL_CACHE_DIR", "$XDG_CACHE_HOME", "TORCHINDUCTOR_CACHE_DIR",
                 "TRITON_CACHE_DIR", "WARP_CACHE_PATH", "~/.cache/warp/", "compile_caches", "make run"):
        assert text in section, f"docs/guide.md's 'Compile caches' does not name {text}"
    assert compiling.default_inductor_cache_dir().parts[-2:] == ("compile", "torchinductor")


def test_warps_path_is_predicted_as_warp_resolves_it(tmp_path: Path) -> None:
    """warp.init() in a fresh process (CPU only) against compiling's prediction, with and without WARP_CACHE_PATH."""
    code = ("import warp as wp; wp.config.quiet = True; wp.init(); "
            "from duorl.gpu.compiling import warp_kernel_cache_dir; print(wp.config.kernel_cache_dir); "
            "import sys; del sys.modules['warp']; print(warp_kernel_cache_dir())")
    for extra in ({"XDG_CACHE_HOME": str(tmp_path / "xdg")}, {"WARP_CACHE_PATH": str(tmp_path / "wcache")}):
        env = {k: v for k, v in os.environ.items() if k not in ("WARP_CACHE_PATH", "XDG_CACHE_HOME")}
        env.update(extra, CUDA_VISIBLE_DEVICES="")
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
        assert r.returncode == 0, r.stderr[-2000:]
        warps, ours = r.stdout.strip().splitlines()[-2:]
        assert warps == ours and warps.startswith(str(tmp_path)), (warps, ours)


def test_the_manifest_records_the_cache_directories(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from duorl.cli.configure import load_config
    from duorl.cli.run_context import Checked, Place, RunContext
    from duorl.cli.train_steps.manifest import run_manifest
    from duorl.config.switches import resolve_switches
    from duorl.envs.registry import make_task

    monkeypatch.setenv("DUORL_CACHE_DIR", str(clean_env / "mine"))
    compiling.use_persistent_compile_caches()
    cfg = load_config("sac", "pendulum_swingup", "mujoco", [])
    spec = make_task(cfg.task).spec
    run = RunContext(cfg, torch.device("cpu"), None, Place(None), 0.0,  # type: ignore[arg-type]
                     checked=Checked(resolve_switches(cfg, "cpu"), None, None, None, spec))  # type: ignore[arg-type]
    manifest = run_manifest(run)
    assert manifest["compile_caches"] == compiling.compile_cache_dirs()
    assert manifest["compile_caches"]["torchinductor"] == str(clean_env / "mine" / "compile" / "torchinductor")


# a learner that compiles, then a collector it spawns that compiles the same code (as a duo does)
_TWO_PROCESSES = '''
import json, multiprocessing as mp, os, sys

def compile_and_run(tag):
    import torch
    from duorl.gpu.compiling import maybe_compile

    maybe_compile(lambda x: torch.sin(x) * 2 + 1, True)(torch.ones(8))
    from torch._dynamo.utils import counters  # after: importing torch._dynamo fills in torch's /tmp default
    print(json.dumps({"tag": tag, "hit": counters["inductor"]["fxgraph_cache_hit"],
                      "miss": counters["inductor"]["fxgraph_cache_miss"],
                      "dir": os.environ.get("TORCHINDUCTOR_CACHE_DIR")}), flush=True)

if __name__ == "__main__":
    compile_and_run("learner")
    p = mp.get_context("spawn").Process(target=compile_and_run, args=("collector",))
    p.start(); p.join(); sys.exit(p.exitcode)
'''


@pytest.mark.slow
def test_a_second_process_hits_the_fx_graph_cache_the_first_filled(tmp_path: Path) -> None:
    """CPU Inductor: a process compiles (a miss) into duorl's cache; the process it spawns finds the graph
    there (a hit). About 40 s on a loaded 2-core machine: Inductor's C++ compile and two torch imports."""
    script = tmp_path / "two_processes.py"
    script.write_text(_TWO_PROCESSES, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in (*SET_BY_US, *LEFT_ALONE, "XDG_CACHE_HOME")}
    env.update(DUORL_CACHE_DIR=str(tmp_path / "cache"), TORCHINDUCTOR_COMPILE_THREADS="1", CUDA_VISIBLE_DEVICES="",
               PYTHONPATH=os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")]))
    expected = str(tmp_path / "cache" / "compile" / "torchinductor")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    learner, collector = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert (learner["tag"], collector["tag"]) == ("learner", "collector")
    assert learner["dir"] == collector["dir"] == expected, (learner, collector)
    assert (learner["miss"], learner["hit"]) == (1, 0), learner  # cold: compiled and stored
    assert (collector["miss"], collector["hit"]) == (0, 1), collector  # warm: loaded, not compiled
    assert any((Path(expected) / "fxgraph").iterdir())
