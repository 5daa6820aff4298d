import pytest
import torch
from torch import nn

from duorl.runtime.weights import WeightBoard, publish_mode


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 4)
        self.norm = nn.LayerNorm(4)
        self.register_buffer("mean", torch.zeros(3))


def test_publish_and_load_double_buffered():
    src, dst = Net(), Net()
    board = WeightBoard.allocate(src, torch.device("cpu"))
    board.publish(src, 0)
    with torch.no_grad():
        for p in src.parameters():
            p.add_(1.0)
        src.mean.fill_(7.0)
    board.publish(src, 1)
    board.load_into(dst, 1)
    for (k, a), (_, b) in zip(src.state_dict().items(), dst.state_dict().items()):
        assert torch.equal(a, b), k
    # slot 0 still holds version 0
    v0 = Net()
    board.load_into(v0, 0)
    assert torch.equal(v0.mean, torch.zeros(3))


def test_event_mode_is_cuda_only_and_a_bad_value_is_refused(monkeypatch) -> None:
    monkeypatch.setenv("DUORL_WEIGHT_PUBLISH", "event")
    assert publish_mode(torch.device("cuda", 0)) == "event"
    assert publish_mode(torch.device("cpu")) == "sync"
    monkeypatch.setenv("DUORL_WEIGHT_PUBLISH", "later")
    with pytest.raises(ValueError, match="DUORL_WEIGHT_PUBLISH='later'"):
        publish_mode(torch.device("cuda", 0))
    with pytest.raises(ValueError, match="needs a CUDA device"):
        WeightBoard.allocate(Net(), torch.device("cpu"), "event")
