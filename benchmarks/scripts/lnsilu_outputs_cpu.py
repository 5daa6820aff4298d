"""Issue #41: the fused LayerNorm+SiLU forward and backward outputs of one tree, saved for a bitwise comparison
with another (run once per tree, each in its own process: the custom ops register once per process).

    TRITON_INTERPRET=1 PYTHONPATH=TREE/src:<triton> python benchmarks/scripts/lnsilu_outputs_cpu.py OUT.pt
"""

import sys

import torch

from duorl.gpu import fused_norm as fn

torch.manual_seed(0)
out = {}
for spec in ("v1", "v2", "v2:2048:4:3"):
    fn.BACKWARD = fn.parse_backward(spec)
    for (g, m, n, ib, dt) in [(2, 96, 768, True, torch.bfloat16), (2, 64, 192, False, torch.float32), (0, 80, 128, True, torch.float32)]:
        gen = torch.Generator().manual_seed(g * 1000 + m + n)
        shape = (g, m, n) if g else (m, n)
        x = torch.randn(shape, generator=gen).to(dt).requires_grad_()
        pshape = (g, n) if g else (n,)
        w = torch.randn(pshape, generator=gen).requires_grad_()
        b = torch.randn(pshape, generator=gen).requires_grad_()
        ibias = torch.randn(pshape, generator=gen).requires_grad_() if ib else None
        y = fn.layer_norm_silu(x, w, b, 1e-5, in_bias=ibias) if ib else fn.layer_norm_silu(x, w, b, 1e-5)
        dy = torch.randn(y.shape, generator=gen).to(y.dtype)
        y.backward(dy)
        key = f"{spec}-{g}-{m}-{n}-{ib}"
        out[key] = [t.detach().clone() for t in (y, x.grad, w.grad, b.grad) + ((ibias.grad,) if ib else ())]
torch.save(out, sys.argv[1])
print("saved", len(out))
