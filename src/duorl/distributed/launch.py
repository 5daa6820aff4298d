"""Starting the ranks of a data-parallel run, and what a rank learns about itself (docs/design.md §4).

Launching is PyTorch's job: `duorl train ... training.devices=[0,1]` hands the very same command line
to `torch.distributed.launcher` (the engine behind `torchrun`), which starts one worker per entry,
watches them and ends all of them when one fails. `torchrun --nproc-per-node=N -m duorl train ...`
(also multi-node, with c10d rendezvous) starts the same workers. Each worker is a rank: it narrows
CUDA_VISIBLE_DEVICES to its one entry before CUDA initialises and uses cuda:0, and its collector
inherits that. A failing rank records why in torchelastic's error file, so the launcher names the
rank, its host and the part that failed.
"""

from __future__ import annotations

import json
import os
import platform
import re
import socket
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from duorl.config.devices import KEY as DEVICES_KEY
from duorl.config.devices import RANK_DEVICE_ENV, entry_kind
from duorl.config.errors import ConfigError
from duorl.distributed.rank_scratch import rank_scratch_dir, remove_rank_scratch  # noqa: F401 - re-exported
from duorl.runtime.stop_signals import STOPPED_BEFORE_START  # stdlib only

# the launcher's shutdown grace: a rank asked to stop has this long for its final checkpoint
SHUTDOWN_GRACE_S = 20


@dataclass(frozen=True)
class RankEnv:
    """What torchrun / the elastic launcher tells a worker about its place in the run."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    node_rank: int
    run_id: str

    @property
    def host(self) -> str:
        return platform.node()


def rank_env(environ: dict[str, str] | None = None) -> RankEnv | None:
    """This process's RankEnv when a torch elastic agent started it, else None."""
    env = os.environ if environ is None else environ
    needed = ("RANK", "WORLD_SIZE", "LOCAL_RANK")
    if not all(k in env for k in needed):
        return None
    local_world = int(env.get("LOCAL_WORLD_SIZE", env["WORLD_SIZE"]))
    return RankEnv(
        rank=int(env["RANK"]),
        world_size=int(env["WORLD_SIZE"]),
        local_rank=int(env["LOCAL_RANK"]),
        local_world_size=local_world,
        node_rank=int(env.get("GROUP_RANK", "0")),
        run_id=env.get("TORCHELASTIC_RUN_ID", ""),
    )


def rank_device_entry(devices: Sequence[Any] | None, sim: str, renv: RankEnv, gpus_visible: int) -> Any:
    """This rank's entry of training.devices: the list is per node, one entry per local rank. With
    `null`, local rank r takes CUDA ordinal r when the sim can use CUDA (mjwarp) and GPUs are visible,
    else the CPU."""
    if devices is None:
        if sim == "mjwarp" and gpus_visible > renv.local_rank:
            return renv.local_rank
        return "cpu"
    if len(devices) != renv.local_world_size:
        raise ConfigError(
            DEVICES_KEY, list(devices),
            f"lists {len(devices)} device(s) but this node runs {renv.local_world_size} rank(s) (one entry per local rank)",
            f"{renv.local_world_size} entries", f"give one device per rank, or start {len(devices)} ranks per node",
        )
    return devices[renv.local_rank]


def check_rank_entry(cfg: Any, entry: Any) -> None:
    """This rank's entry of training.devices names a device this process can use: the check plain `duorl
    train` makes (config/devices.resolve_entry, the same ConfigError), made before the rank narrows
    CUDA_VISIBLE_DEVICES (after that every GPU entry reads cuda:0) and without initialising CUDA (the GPUs
    are counted through NVML; a CPU build of torch has none). A GPU UUID or MIG id is checked once
    narrowed, when it is the only GPU left: here only that some GPU is visible."""
    if entry_kind(entry) == "cpu":
        return
    import torch

    from duorl.config.devices import resolve_entry

    count = nvml_gpu_count() if torch.version.cuda is not None else 0
    if entry_kind(entry) == "ordinal" or count == 0:
        resolve_entry(cfg, entry, count)


def narrow_visible_devices(entry: Any) -> str:
    """Narrow CUDA_VISIBLE_DEVICES to `entry` (call before CUDA initialises); returns the torch device
    this rank uses. An ordinal counts within the CUDA_VISIBLE_DEVICES the rank was started with."""
    kind = entry_kind(entry)
    if kind == "cpu":
        # the CPU rank and its collector never open a CUDA context by accident
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
        device = "cpu"
    else:
        if kind == "ordinal":
            n = int(str(entry).split(":")[-1])
            parent = [e.strip() for e in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if e.strip()]
            if "CUDA_VISIBLE_DEVICES" in os.environ and n >= len(parent):
                raise ConfigError(DEVICES_KEY, entry, f"CUDA_VISIBLE_DEVICES={os.environ['CUDA_VISIBLE_DEVICES']!r} "
                                  f"holds {len(parent)} device(s)", f"ordinals 0..{len(parent) - 1}",
                                  "pick ordinals within CUDA_VISIBLE_DEVICES, or unset it")
            visible = parent[n] if parent else str(n)
        else:  # a GPU UUID or a MIG id selects itself
            visible = str(entry)
        os.environ["CUDA_VISIBLE_DEVICES"] = visible
        device = "cuda:0"
    os.environ[RANK_DEVICE_ENV] = device
    return device


def nvml_gpu_count() -> int:
    """GPUs visible to this process, counted without initialising CUDA (NVML); 0 without a driver."""
    from duorl.gpu import torch_internals

    try:
        n = torch_internals.device_count_nvml()
    except torch_internals.TorchInternalMissing:
        raise
    except Exception:  # noqa: BLE001 - no NVML, no GPU
        return 0
    return max(int(n), 0)


# ------------------------------------------------------------------------------------------- errors


def record_rank_failure(message: str, part: str, secondary: bool = False) -> None:
    """Write this rank's failure into torchelastic's error file (when a launcher gave one), where the
    launcher and torchrun read it, and into the agents' store, where every node reads it
    (distributed/failure_board.py). `secondary`: the rank failed only because a peer rank was lost."""
    _post_failure(message, part, secondary)
    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if not path:
        return
    data = {"message": {"message": message, "extraInfo": {
        "timestamp": str(int(time.time())), "duorl_part": part, "duorl_secondary": secondary,
        "host": platform.node(), "pid": os.getpid(),
    }}}
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(data))
    except OSError:
        pass  # the message is on stderr too


def _post_failure(message: str, part: str, secondary: bool) -> None:
    """The failure board's copy of a rank's record. A message that names another rank first ("rank 1
    (vm): ..." on rank 0: every rank refusing together with one rank's reason) is that rank's echo."""
    from duorl.distributed import failure_board

    renv = rank_env()
    if renv is None:
        return
    named = re.match(r"rank (\d+) \(", message)
    if named is None:
        message = f"rank {renv.rank} ({renv.host}): {message}"
    elif int(named.group(1)) != renv.rank:
        secondary = True
    failure_board.post(renv, failure_board.FailureRecord.of(renv.rank, message, part, secondary))


@dataclass(frozen=True)
class RankFailure:
    rank: int
    exitcode: int
    message: str
    secondary: bool
    signal: str | None
    part: str = "learner"


def summarize_failures(failures: dict[int, Any]) -> tuple[str, int]:
    """One message naming the rank(s) whose own failure ended the run, and the launcher's exit code
    (2 when every failed rank refused its input, else 1)."""
    message, code, _ = _summarize(failures)
    return message, code


def _summarize(failures: dict[int, Any]) -> tuple[str, int, RankFailure]:
    """summarize_failures, and the first root failure (what the run summary records)."""
    import signal as _signal

    host = platform.node()  # the launcher starts the ranks of its own host
    rows: list[RankFailure] = []
    for rank, f in sorted(failures.items()):
        info = (f.error_file_data or {}).get("message", {}) if isinstance(f.error_file_data, dict) else {}
        extra = info.get("extraInfo", {}) if isinstance(info, dict) else {}
        own = isinstance(info, dict) and "duorl_part" in extra
        # a SIGTERM without a duorl record is the launcher stopping a rank after another one failed
        stopped = not own and f.exitcode == -int(_signal.SIGTERM)
        if own:
            msg = str(info.get("message", "")).strip()
        elif f.exitcode < 0:
            msg = f"rank {rank} ({host}): the learner (pid {f.pid}) was killed by signal {f.signal_name()}"
        else:
            msg = f"rank {rank} ({host}): the learner (pid {f.pid}) exited with code {f.exitcode} (no duorl error recorded)"
        sig = f.signal_name() if f.exitcode < 0 else None
        secondary = bool(extra.get("duorl_secondary", False)) if own else stopped
        rows.append(RankFailure(rank, f.exitcode, msg, secondary, sig, str(extra.get("duorl_part", "learner"))))
    primary = [r for r in rows if not r.secondary] or rows
    code = 2 if all(r.exitcode == 2 for r in primary) else 1
    lines = list(dict.fromkeys(r.message for r in primary))  # ranks that agreed on one failure say it once
    others = [r for r in rows if r not in primary]
    if others:
        which = ", ".join(str(r.rank) for r in others)
        lines.append(f"(rank{'s' if len(others) > 1 else ''} {which} stopped because another rank failed)")
    return "\n".join(lines), code, primary[0]


# ----------------------------------------------------------------------------------------- launcher


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def elastic_log_dir(run_id: str) -> Path:
    """The folder the launcher gives torch's elastic agent for its per-rank files (the error files the
    ranks write on failure), made here and removed with the run (left to the agent, it is a
    /tmp/torchelastic_* tree per run, clean runs included)."""
    import tempfile

    return Path(tempfile.mkdtemp(prefix=f"{run_id}-{os.getpid()}-elastic-"))


def leave_no_elastic_tree(environ: dict[str, str] | None = None) -> None:
    """A rank that ends cleanly removes its agent's folders for it, where they hold nothing (no error
    file: the agent reads none): its own `attempt_N/<local rank>` folder and, once empty, each folder above
    it up to the tree's top in the temporary directory (the last clean rank of a node removes the whole
    /tmp/torchelastic_* tree). A tree elsewhere (torchrun --log-dir) is the user's and stays."""
    import tempfile

    env = os.environ if environ is None else environ
    error_file = env.get("TORCHELASTIC_ERROR_FILE")
    if not error_file:
        return
    tmp = Path(tempfile.gettempdir()).resolve()
    folder = Path(error_file).resolve().parent
    if tmp not in folder.parents:
        return
    top = folder.relative_to(tmp).parts[0]
    if not (top.startswith("torchelastic_") or "-elastic-" in top):  # torch's name for it, or the launcher's
        return
    while folder != tmp:
        try:
            folder.rmdir()  # only an empty folder: another rank's, or a failure's error file, stays
        except OSError:
            return
        folder = folder.parent


class _ForcedKills:
    """Counts the ranks torch's launcher had to SIGKILL after its shutdown grace (it says so only in a
    log line: "Unable to shutdown process ... forcefully exiting")."""

    def __init__(self) -> None:
        import logging

        self.pids: list[str] = []
        outer = self

        class _Handler(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                if record.msg.startswith("Unable to shutdown process") and record.args:
                    outer.pids.append(str(record.args[0]))

        self._handler = _Handler()
        self._logger = logging.getLogger("torch.distributed.elastic.multiprocessing.api")

    def __enter__(self) -> "_ForcedKills":
        self._logger.addHandler(self._handler)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._logger.removeHandler(self._handler)


def _pass_early_stop_on() -> Any:
    """A stop request recorded while the launcher was starting (before torch's launcher took the
    signals over) is passed on once it has: torch's launcher then stops every rank at one boundary."""
    import signal as _signal
    import threading

    from duorl.runtime.stop_signals import STOP_REQUEST

    done = threading.Event()
    ours = _signal.getsignal(_signal.SIGTERM)

    def watch() -> None:
        while not done.wait(0.1):
            if STOP_REQUEST.signal is not None and _signal.getsignal(_signal.SIGTERM) != ours:
                os.kill(os.getpid(), STOP_REQUEST.signal)
                return

    threading.Thread(target=watch, name="duorl-early-stop", daemon=True).start()
    return done


def launch(argv: Sequence[str], nprocs: int, run_dir: str | None = None) -> int:
    """Run `python -m duorl <argv>` as `nprocs` ranks on this host through torch's elastic launcher;
    returns the run's exit code (0 completed or cleanly interrupted, 1 failed, 2 refused). The ranks
    die with this process, whatever kills it (runtime/orphans.py); their scratch folders go with the run."""
    from duorl.runtime.orphans import RANK, naming_parent, stop_signals_held_for_children

    import shutil

    run_id = f"duorl-{uuid.uuid4().hex[:12]}"
    log_dir = elastic_log_dir(run_id)
    try:
        with naming_parent(RANK), stop_signals_held_for_children():
            return _launch(argv, nprocs, run_dir, run_id, log_dir)
    finally:
        remove_rank_scratch(run_id, range(1, nprocs))
        shutil.rmtree(log_dir, ignore_errors=True)  # the failures were read from it already


def _launch(argv: Sequence[str], nprocs: int, run_dir: str | None, run_id: str, log_dir: Path) -> int:
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    # torch >= 2.12 takes the shutdown grace as a field; before, it is its fixed 30 s
    grace = {"shutdown_timeout": SHUTDOWN_GRACE_S} if "shutdown_timeout" in LaunchConfig.__dataclass_fields__ else {}
    config = LaunchConfig(
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=nprocs,
        run_id=run_id,
        rdzv_backend="c10d",
        rdzv_endpoint=f"127.0.0.1:{_free_port()}",
        max_restarts=0,  # a failed rank ends the run: restarting would hide it
        monitor_interval=0.2,
        logs_specs=DefaultLogsSpecs(log_dir=str(log_dir)),
        **grace,
    )
    print(f"duorl: data parallel: starting {nprocs} ranks on this host (torch.distributed.launcher)", flush=True)
    early = _pass_early_stop_on()
    try:
        with _ForcedKills() as forced:
            elastic_launch(config, sys.executable)("-m", "duorl", *argv)
    except ChildFailedError as e:
        message, code, root = _summarize(e.failures)
        print(f"duorl: error: the data-parallel run failed:\n{message}", file=sys.stderr, flush=True)
        if code != 2:
            _record_in_summary(run_dir, root.message, root.part, failed_rank=root.rank,
                               **({"failed_signal": root.signal} if root.signal else {}))
        return code
    except SignalException as e:
        # the launcher passed the signal on and every rank stopped at one boundary with a final
        # checkpoint, unless one had to be killed: the run summary says which
        return _after_signal(e.sigval.name, run_dir, forced.pids)
    finally:
        early.set()
    return 0


def _record_in_summary(run_dir: str | None, message: str, part: str, **fields: Any) -> None:
    """The launcher outlives every rank: a run summary that still says the run goes on, or holds only a
    peer's echo of the failure, gets the root cause (rank, part, why)."""
    if run_dir is None:
        return
    from duorl.runtime.outcome import record_failure

    record_failure(Path(run_dir) / "run_summary.json", message, part, **fields)


def _after_signal(signal_name: str, run_dir: str | None, killed: list[str]) -> int:
    status = None
    if run_dir is not None:
        try:
            status = json.loads((Path(run_dir) / "run_summary.json").read_text()).get("status")
        except (OSError, ValueError):
            status = None
    if killed:
        why = (f"{signal_name}: torch's launcher had to kill {len(killed)} rank process(es) (pid {', '.join(killed)}) "
               f"after its {SHUTDOWN_GRACE_S} s grace")
        print(f"duorl: {why} (run status: {status or 'unknown'})", file=sys.stderr, flush=True)
        if status not in ("interrupted", "completed"):
            _record_in_summary(run_dir, why, "learner")
        return 0 if status in ("interrupted", "completed") else 1
    if status in ("interrupted", "completed"):
        print(f"duorl: {signal_name}: every rank stopped cleanly ({status})", file=sys.stderr, flush=True)
        return 0
    if status is None and run_dir is not None and not (Path(run_dir) / "run_summary.json").exists():
        print(f"duorl: {signal_name}: {STOPPED_BEFORE_START}", file=sys.stderr, flush=True)
        return 0
    print(f"duorl: {signal_name}: the ranks were stopped (run status: {status or 'unknown'})", file=sys.stderr, flush=True)
    return 1
