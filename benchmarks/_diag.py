import time, torch, triton
from blockfuse.ops import norm
import blockfuse

def host_us(fn, n=300):
    fn(); torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n): fn()
    r = (time.perf_counter() - t) / n * 1e6
    torch.cuda.synchronize()
    return r

x = torch.randn(64, 1024, device="cuda", dtype=torch.bfloat16); w = torch.randn(1024, device="cuda", dtype=torch.bfloat16)
y = torch.empty_like(x); rstd = torch.empty(64, device="cuda")
args = (x, None, w, None, y, None, rstd, rstd, None, 1024, 0, 1024, 0, 64, 1024, 1e-6, 0.0, 1.0)
kw = dict(IS_RMS=True, MODE=0, HAS_W=True, HAS_B=False, HAS_DROPOUT=False, CAST_BEFORE_WEIGHT=False, BLOCK_M=8, BLOCK_N=1024, NUM_CHUNKS=1, num_warps=8)
ck = norm._norm_fwd_kernel[(8,)](*args, **kw)
print("compiled kernel type", type(ck))
full = [*args] + [kw[k] for k in ["IS_RMS","MODE","HAS_W","HAS_B","HAS_DROPOUT","CAST_BEFORE_WEIGHT","BLOCK_M","BLOCK_N","NUM_CHUNKS"]]
runner = ck[(8, 1, 1)]
try:
    runner(*full); torch.cuda.synchronize(); print("runner ok", torch.allclose(y.float(), blockfuse.rms_norm_ref(x, w).float(), atol=1e-2))
    print("runner          %.1f us" % host_us(lambda: runner(*full)))
except Exception as e:
    print("runner failed", repr(e)[:300])
print("kernel[grid]    %.1f us" % host_us(lambda: norm._norm_fwd_kernel[(8,)](*args, **kw)))
print("4x torch.empty  %.1f us" % host_us(lambda: (torch.empty_like(x), torch.empty_like(x), torch.empty(64, device="cuda"), torch.empty(64, device="cuda"))))
print("launcher        %.1f us" % host_us(lambda: norm._norm_forward(x, w, None, None, None, 1e-6, "none", 0.0, True, False)))
print("custom op       %.1f us" % host_us(lambda: norm._rms_norm_op(x, w, None, None, 1e-6, "none", 0.0, False)))
xg = x.clone().requires_grad_()
print("custom op+grad  %.1f us" % host_us(lambda: norm._rms_norm_op(xg, w, None, None, 1e-6, "none", 0.0, False)))
print("functional      %.1f us" % host_us(lambda: blockfuse.rms_norm(x, w)))
print("functional+grad %.1f us" % host_us(lambda: blockfuse.rms_norm(xg, w)))
class F(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        return norm._norm_forward(x, w, None, None, None, 1e-6, "none", 0.0, True, False)[0]
    @staticmethod
    def backward(ctx, g):
        return g, None
print("autograd.Function+grad %.1f us" % host_us(lambda: F.apply(xg, w)))
print("F.rms_norm      %.1f us" % host_us(lambda: torch.nn.functional.rms_norm(x, (1024,), w, 1e-6)))
print("F.rms_norm+grad %.1f us" % host_us(lambda: torch.nn.functional.rms_norm(xg, (1024,), w, 1e-6)))
c = torch.compile(lambda a, b: blockfuse.rms_norm_ref(a, b))
c(xg, w)
print("compiled ref+grad %.1f us" % host_us(lambda: c(xg, w)))
