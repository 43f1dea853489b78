import sys, time, torch
from blockfuse.ops import fp8, launch
h = torch.zeros(16, device='cuda'); a = torch.rand(1, device='cuda')
x = torch.randn(4096, 2048, device='cuda', dtype=torch.bfloat16)
for pdl in (True, False, True, False):
    launch.PDL = pdl
    for _ in range(200): fp8.roll_amax_history(h, a)
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(5000): fp8.roll_amax_history(h, a)
    t1 = time.perf_counter(); torch.cuda.synchronize(); t2 = time.perf_counter()
    print(f"roll PDL={pdl}: host {(t1-t)/5000*1e6:.2f} us/call, wall {(t2-t)/5000*1e6:.2f} us/call", flush=True)
    for _ in range(200): x.add_(0.0); fp8.roll_amax_history(h, a)
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(5000): x.add_(0.0); fp8.roll_amax_history(h, a)
    t1 = time.perf_counter(); torch.cuda.synchronize(); t2 = time.perf_counter()
    print(f"add+roll PDL={pdl}: host {(t1-t)/5000*1e6:.2f} us/pair, wall {(t2-t)/5000*1e6:.2f} us/pair", flush=True)
print("fast-path cache of roll:", len(fp8._roll_kernel._cache), "plain:", fp8._roll_kernel._plain)
