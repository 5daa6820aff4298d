"""What every rank must agree on before anything is built: the resolved configuration and the layout
of what travels between ranks. Each check returns the problem (naming the keys and the ranks), or None.
"""

from __future__ import annotations

from typing import Any

from duorl.config.keys import flatten


def config_mismatch(configs: list[dict[str, Any]]) -> str | None:
    """The keys whose resolved values differ between ranks, with each rank's value."""
    flat = [flatten(c) for c in configs]
    keys = sorted(set().union(*flat))
    bad = []
    for key in keys:
        values = [f.get(key) for f in flat]
        if any(v != values[0] for v in values[1:]):
            bad.append(f"{key} (" + ", ".join(f"rank {r}: {v!r}" for r, v in enumerate(values)) + ")")
    if not bad:
        return None
    return ("the ranks were started with different configurations: " + "; ".join(bad)
            + ". Fix: start every rank with the same command and overrides")


def layout_mismatch(layouts: list[dict[str, Any]]) -> str | None:
    """Optimizer groups, their sizes and wire dtypes must be the same on every rank."""
    differing = [r for r, layout in enumerate(layouts) if layout != layouts[0]]
    if not differing:
        return None
    return (f"ranks {', '.join(map(str, differing))} hold a gradient layout or wire dtype other than rank 0's "
            f"(rank 0: {layouts[0]}; rank {differing[0]}: {layouts[differing[0]]}). Fix: start every rank with the "
            "same algo settings and training.dp_gradient_wire_dtype")


def state_digest(state: dict[str, Any], skip: tuple[str, ...] = ()) -> str:
    """A sha256 of a learner's state_dict (every tensor's dtype, shape and bytes; other values' repr),
    leaving out the top-level entries in `skip` (per-rank bookkeeping such as metric buffers)."""
    import hashlib

    import torch

    h = hashlib.sha256()

    def feed(key: str, value: Any) -> None:
        if isinstance(value, dict):
            for k in sorted(value, key=str):
                feed(f"{key}.{k}", value[k])
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                feed(f"{key}[{i}]", v)
        elif isinstance(value, torch.Tensor):
            t = value.detach().cpu().contiguous().reshape(-1)
            h.update(f"{key}:{value.dtype}:{tuple(value.shape)}:".encode())
            h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
        else:
            h.update(f"{key}={value!r};".encode())

    for key in sorted(state):
        if key not in skip:
            feed(key, state[key])
    return h.hexdigest()
