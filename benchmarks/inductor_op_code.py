"""What Inductor generates for blockfuse ops on CUDA: compiles a small function over every op that is on
the launcher-op path, forward and backward, writes the generated code, and says whether each blockfuse
kernel is emitted as a Triton kernel in Inductor's code (and no ``torch.ops.blockfuse`` extern call
remains).

Run on the GPU:  PYTHONPATH=src python3 benchmarks/inductor_op_code.py OUT_FILE
"""

import re
import sys

import torch
from torch._inductor.utils import run_and_get_code

import blockfuse
from blockfuse.ops import launch


def block(x, residual, w, b, gate, up):
    y, s = blockfuse.layer_norm(x, w, b, residual=residual)
    z = blockfuse.rms_norm(y, w, residual=s, residual_mode="post", dropout_p=0.1)
    g = blockfuse.layer_norm_gelu(z, w, b)
    return g + blockfuse.rms_norm(z, w, cast_before_weight=True) + blockfuse.swiglu(gate, up)


def main(out: str) -> int:
    torch.manual_seed(0)
    shape = (512, 1024)
    x, residual, gate, up = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                             for _ in range(4))
    w = torch.randn(1024, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    b = torch.randn(1024, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    compiled = torch.compile(block, fullgraph=True)

    def step():
        out = compiled(x, residual, w, b, gate, up)
        out.float().sum().backward()
        return out

    result, codes = run_and_get_code(step)
    eager = block(x, residual, w, b, gate, up)
    text = "\n\n# ======== next module ========\n\n".join(codes)
    with open(out, "w") as f:
        f.write(text)
    defined = set(re.findall(r"def (\w+)\(", text))
    ours = sorted(name for name in launch.KERNEL_NAMES if name in defined)
    extern = sorted(set(re.findall(r"torch\.ops\.blockfuse\.(\w+)", text)))
    print(f"blockfuse kernels emitted by Inductor: {ours}")
    print(f"torch.ops.blockfuse extern calls left: {extern}")
    print(f"compiled vs eager output, max abs difference: {(result - eager).abs().max().item():.3e} "
          f"(dropout draws differ between the two calls)")
    return 0 if ours and not extern else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
