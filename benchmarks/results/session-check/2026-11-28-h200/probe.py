"""Which traced path garbles v's copy: copy_rows on a slice of a GEMM's output, compiled with Inductor."""
import sys, torch
torch.manual_seed(0)
from blockfuse.ops import copy as C
x = torch.randn(512, 256, device="cuda", dtype=torch.bfloat16)
w = torch.randn(256, 3 * 4 * 64, device="cuda", dtype=torch.bfloat16)
def view_v(x, w):
    return (x @ w).view(2, 256, 3 * 4, 64)[:, :, 8:]
def with_copy_rows(x, w):
    return C.copy_rows(view_v(x, w)) * 1.0
def with_op(x, w):
    v = view_v(x, w)
    (m, n), rs = C._rows_of(v)
    return C._copy_rows(v.as_strided((m, n), (rs, 1))).view(v.shape) * 1.0
def with_op_plain(x, w):
    v = view_v(x, w)
    return C._copy_rows((x @ w)[:, 512:]).view(2, 256, 4, 64) * 1.0
ref = view_v(x, w).contiguous()
for f in (with_copy_rows, with_op, with_op_plain):
    torch._dynamo.reset()
    try:
        out = torch.compile(f, fullgraph=True)(x, w)
        print(f.__name__, "max abs diff", (out.float() - ref.float()).abs().max().item(), flush=True)
    except Exception as e:
        print(f.__name__, "error", type(e).__name__, str(e)[:300], flush=True)
