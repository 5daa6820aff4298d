"""The MPS probe against fake hosts (every prerequisite, in order) and real UNIX sockets."""

import os
import socket
from dataclasses import dataclass, field

import pytest

from duorl.mps.probe import MpsUnavailable, RealHost, probe_mps, verify_clients

PIPE = "/tmp/fake-mps"


@dataclass
class FakeHost:
    plat: str = "linux"
    cuda: bool = True
    uuids: dict = field(default_factory=lambda: {"cuda:0": "GPU-a", "cuda:1": "GPU-b"})
    kinds: dict = field(default_factory=lambda: {PIPE: "dir", PIPE + "/control": "socket"})
    accepts: bool = True
    servers: tuple = (0, "4242\n")
    clients: dict = field(default_factory=lambda: {4242: "100\n200\n"})
    calls: list = field(default_factory=list)

    def platform(self):
        self.calls.append("platform")
        return self.plat

    def cuda_available(self):
        self.calls.append("cuda")
        return self.cuda

    def device_uuid(self, device):
        return self.uuids.get(device)

    def path_kind(self, path):
        return self.kinds.get(path, "missing")

    def socket_accepts(self, path):
        return self.accepts

    def control(self, pipe_dir, command):
        self.calls.append(command)
        if command == "get_server_list":
            return self.servers
        pid = int(command.split()[1])
        return (0, self.clients.get(pid, ""))


class ExplodingHost:
    def __getattr__(self, name):
        raise AssertionError(f"null mode touched the host ({name})")


def _probe(host, learner="cuda:0", collector="cuda:0"):
    return probe_mps("mps", learner, collector, host, pipe_dir=PIPE)


CASES = [
    ("non-linux", dict(plat="darwin"), {}, "linux", "Linux"),
    ("no cuda", dict(cuda=False), {}, "cuda", "nvidia-smi"),
    ("cpu learner", {}, dict(learner="cpu"), "cuda_devices", "training.devices=[0]"),
    ("cpu collector", {}, dict(collector="cpu"), "cuda_devices", "one GPU"),
    ("uuid mismatch", {}, dict(collector="cuda:1"), "same_gpu", "same GPU"),
    ("missing pipe dir", dict(kinds={}), {}, "control_socket", "duorl mps start"),
    ("control missing", dict(kinds={PIPE: "dir"}), {}, "control_socket", "nvidia-cuda-mps-control -d"),
    ("control a regular file", dict(kinds={PIPE: "dir", PIPE + "/control": "file"}), {}, "control_socket", "remove the stale"),
    ("socket but no daemon", dict(accepts=False), {}, "control_socket", f"remove {PIPE}/control"),
    ("get_server_list fails", dict(servers=(1, "Cannot find MPS control daemon")), {}, "daemon", "duorl mps stop"),
]


@pytest.mark.parametrize(("name", "host_kw", "dev_kw", "prereq", "remedy"), CASES, ids=[c[0] for c in CASES])
def test_first_unmet_prerequisite_and_its_remedy(name, host_kw, dev_kw, prereq, remedy):
    with pytest.raises(MpsUnavailable) as e:
        _probe(FakeHost(**host_kw), **dev_kw)
    assert e.value.prerequisite == prereq
    assert remedy in str(e.value).split("Fix:", 1)[1]
    assert "training.cuda_process_sharing=mps" in str(e.value)


def test_order_non_linux_wins_over_everything():
    with pytest.raises(MpsUnavailable) as e:
        _probe(FakeHost(plat="win32", cuda=False, kinds={}, accepts=False))
    assert e.value.prerequisite == "linux"


def test_valid_host_gives_evidence_then_clients_verify():
    host = FakeHost()
    ev = _probe(host)
    assert ev.configured == "mps" and not ev.validated and ev.effective is None
    assert ev.server_pid == 4242 and ev.control_pipe == PIPE + "/control"
    assert ev.learner_uuid == ev.collector_uuid == "GPU-a"
    ok = verify_clients(ev, 100, 200, host)
    assert ok.validated and ok.effective == "mps" and ok.server_pid == 4242
    assert ok.learner_pid == 100 and ok.collector_pid == 200 and set(ok.client_pids) == {100, 200}
    d = ok.to_dict()
    assert d["rank"] == 0 and d["world_size"] == 1 and d["client_pids"] == [100, 200]


def test_pids_missing_from_client_list_abort_naming_what_was_seen():
    host = FakeHost(clients={4242: "100\n"})
    ev = _probe(host)
    with pytest.raises(MpsUnavailable) as e:
        verify_clients(ev, 100, 200, host)
    assert e.value.prerequisite == "clients"
    assert "4242: [100]" in str(e.value) and "pid 200" in str(e.value)


def test_null_mode_never_touches_the_host():
    ev = probe_mps(None, "cuda:0", "cuda:0", ExplodingHost())
    assert ev.configured is None and ev.effective is None and not ev.validated
    assert verify_clients(ev, 1, 2, ExplodingHost()) is ev


def test_real_unix_sockets(tmp_path):
    host = RealHost()
    live = str(tmp_path / "live")
    stale = str(tmp_path / "stale")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(live)
    srv.listen(1)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(stale)  # bound, never listening: the file of a daemon that died
    dead.close()
    try:
        assert host.path_kind(live) == "socket" and host.socket_accepts(live)
        assert host.path_kind(stale) == "socket" and not host.socket_accepts(stale)
        (tmp_path / "regular").write_text("x")
        assert host.path_kind(str(tmp_path / "regular")) == "file"
        assert host.path_kind(str(tmp_path)) == "dir"
        assert host.path_kind(str(tmp_path / "none")) == "missing"
        os.mkfifo(tmp_path / "fifo")
        assert host.path_kind(str(tmp_path / "fifo")) == "fifo"
    finally:
        srv.close()
