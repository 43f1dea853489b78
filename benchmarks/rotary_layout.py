"""RoPE before attention: what the layout of q and k costs in kernels and time.

One attention call takes q, k, v sliced from a fused projection output qkv of shape
(batch, seq, 3, heads, head_dim), applies RoPE to q and k, and calls
``F.scaled_dot_product_attention(q, k, v, is_causal=True)`` on (batch, heads, seq, head_dim)
tensors. Four ways:

* ``bshd-views``:      blockfuse.rotary(layout="bshd"), then ``.transpose(1, 2)`` views to SDPA;
* ``bshd-contiguous``: the same, then ``.contiguous()`` on q, k and v (what many codebases do);
* ``out-bhsd``:        blockfuse.rotary(layout="bshd", out_layout="bhsd"): the kernel writes q and k
                       in SDPA's layout (v goes as a view);
* ``hf-eager``:        transpose to (batch, heads, seq, head_dim), then Hugging Face's
                       ``apply_rotary_pos_emb`` (torch ops in the input dtype).

For each way: GPU kernels per call (torch.profiler, CUDA kernel events; memcpy / memset
events are not kernels and are counted apart), time per call (CUDA events, median of many
calls; CPU: wall clock), and the relative error of the attention output against an fp32
reference. ``--backward`` adds the same for forward + backward. Writes ``rotary_layout.json``
and ``rotary_layout.md`` to ``--out``.

GPU:  PYTHONPATH=src python benchmarks/rotary_layout.py --out benchmarks/results/<dir>
CPU (checks the harness; the kernels run in Triton's interpreter):
      TRITON_INTERPRET=1 PYTHONPATH=src python benchmarks/rotary_layout.py --device cpu --out /tmp/rl
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
WAYS = ("bshd-views", "bshd-contiguous", "out-bhsd", "hf-eager")
NOT_KERNELS = ("memcpy", "memset")  # CUDA events that are copies or fills, not kernel launches


# ---------------------------------------------------------------- inputs


def make_inputs(batch, seq, heads, head_dim, dtype, device, theta=10000.0, seed=0):
    """qkv (batch, seq, 3, heads, head_dim); blockfuse's half tables (seq, head_dim / 2) fp32;
    Hugging Face's per-token tables (1, seq, head_dim) in ``dtype``."""
    from blockfuse.nn.rotary import rotary_tables

    generator = torch.Generator().manual_seed(seed)
    qkv = torch.randn((batch, seq, 3, heads, head_dim), generator=generator).to(dtype=dtype, device=device)
    cos, sin = rotary_tables(seq, head_dim, theta, device)
    hf_cos = torch.cat((cos, cos), dim=-1)[None].to(dtype)
    hf_sin = torch.cat((sin, sin), dim=-1)[None].to(dtype)
    return qkv, (cos, sin), (hf_cos, hf_sin)


def _hf_apply():
    try:
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

        return apply_rotary_pos_emb, "transformers"
    except ImportError:  # the same formula, as torch ops
        from blockfuse.bench.rotary import hf_rotary

        return hf_rotary, "blockfuse.bench.rotary.hf_rotary (transformers not installed)"


def make_ways(half_tables, hf_tables):
    """name -> fn(qkv) -> attention output (batch, heads, seq, head_dim)."""
    from blockfuse.ops.rotary import rotary

    cos, sin = half_tables
    hf_cos, hf_sin = hf_tables
    hf_apply, _ = _hf_apply()

    def bshd_views(qkv):
        q, k = rotary(qkv[:, :, 0], qkv[:, :, 1], cos, sin, layout="bshd")
        return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), qkv[:, :, 2].transpose(1, 2),
                                              is_causal=True)

    def bshd_contiguous(qkv):
        q, k = rotary(qkv[:, :, 0], qkv[:, :, 1], cos, sin, layout="bshd")
        q, k, v = (t.transpose(1, 2).contiguous() for t in (q, k, qkv[:, :, 2]))
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def out_bhsd(qkv):
        q, k = rotary(qkv[:, :, 0], qkv[:, :, 1], cos, sin, layout="bshd", out_layout="bhsd")
        return F.scaled_dot_product_attention(q, k, qkv[:, :, 2].transpose(1, 2), is_causal=True)

    def hf_eager(qkv):
        q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
        q, k = hf_apply(q, k, hf_cos, hf_sin)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    return {"bshd-views": bshd_views, "bshd-contiguous": bshd_contiguous, "out-bhsd": out_bhsd,
            "hf-eager": hf_eager}


def reference_output(qkv, half_tables):
    """The fp32 oracle: rotary_ref and SDPA on fp32 copies."""
    from blockfuse.ops.rotary import rotary_ref

    x = qkv.detach().float()
    cos, sin = half_tables
    q, k = rotary_ref(x[:, :, 0], x[:, :, 1], cos.float(), sin.float(), layout="bshd", out_layout="bhsd")
    return F.scaled_dot_product_attention(q, k, x[:, :, 2].transpose(1, 2), is_causal=True)


def relative_error(out, ref):
    out, ref = out.detach().double(), ref.detach().double()
    return float(torch.linalg.vector_norm(out - ref) / torch.linalg.vector_norm(ref))


# ---------------------------------------------------------------- kernel counts


def _is_cuda_event(event) -> bool:
    device_type = getattr(event, "device_type", None)
    return device_type is not None and str(device_type).split(".")[-1].upper() == "CUDA"


def count_gpu_events(events) -> dict[str, int]:
    """Kernels and copies / fills among a profiler's events (``prof.events()``).

    An event counts when it ran on the GPU (``device_type`` CUDA); GPU-side user annotations
    (``record_function`` ranges mirrored on the GPU timeline) are skipped; names starting
    with memcpy / memset (any case) are copies, everything else is a kernel launch.
    """
    kernels = copies = 0
    for event in events:
        if not _is_cuda_event(event) or getattr(event, "is_user_annotation", False):
            continue
        if event.name.lower().startswith(NOT_KERNELS):
            copies += 1
        else:
            kernels += 1
    return {"kernels": kernels, "copies": copies}


def profile_counts(fn, calls: int, device: torch.device) -> dict[str, float] | None:
    """GPU kernels and copies per call of ``fn`` (None unless ``device`` is a CUDA device)."""
    if device.type != "cuda":
        return None
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    counts = count_gpu_events(prof.events())
    return {name: value / calls for name, value in counts.items()}


# ---------------------------------------------------------------- timing


def time_ms(fn, iters: int, device: str) -> dict[str, float]:
    """Median, p20, p80 milliseconds of one call (CUDA events per call; CPU: wall clock)."""
    for _ in range(3):
        fn()
    samples = []
    if device == "cuda":
        torch.cuda.synchronize()
        pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
        for start, end in pairs:
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
        samples = [start.elapsed_time(end) for start, end in pairs]
    else:
        for _ in range(iters):
            began = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - began) * 1e3)
    ordered = sorted(samples)

    def quantile(q):
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]

    return {"ms": statistics.median(samples), "ms_p20": quantile(0.2), "ms_p80": quantile(0.8)}


# ---------------------------------------------------------------- the run


def measure(args) -> dict:
    device = args.device
    dtype = DTYPES[args.dtype]
    qkv, half_tables, hf_tables = make_inputs(args.batch, args.seq, args.heads, args.head_dim, dtype, device)
    ways = make_ways(half_tables, hf_tables)
    reference = reference_output(qkv, half_tables)
    grad = torch.randn(reference.shape, generator=torch.Generator().manual_seed(1)).to(dtype=dtype, device=device)
    records = []
    for name in args.ways:
        fn = ways[name]
        with torch.no_grad():
            out = fn(qkv)
            record = {"way": name, "mode": "fwd", "rel_err": relative_error(out, reference)}
            record["per_call"] = profile_counts(lambda fn=fn: fn(qkv), args.profile_calls, qkv.device)
            record.update(time_ms(lambda fn=fn: fn(qkv), args.iters, device))
        records.append(record)
        if args.backward:
            leaf = qkv.detach().clone().requires_grad_()

            def step(fn=fn, leaf=leaf):
                leaf.grad = None
                fn(leaf).backward(grad)

            record = {"way": name, "mode": "fwdbwd", "rel_err": None,
                      "per_call": profile_counts(step, args.profile_calls, qkv.device)}
            record.update(time_ms(step, args.iters, device))
            records.append(record)
    return {
        "shape": {"batch": args.batch, "seq": args.seq, "heads": args.heads, "head_dim": args.head_dim},
        "dtype": args.dtype,
        "environment": environment(device),
        "hf_rotary": _hf_apply()[1],
        "records": records,
    }


def environment(device: str) -> dict:
    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    from blockfuse.runtime import implementation

    card = torch.cuda.get_device_name() if device == "cuda" else f"CPU ({platform.machine()})"
    return {"card": card, "torch": torch.__version__, "triton": triton_version,
            "blockfuse_implementation": implementation(device)}


def markdown(result: dict) -> str:
    env, shape = result["environment"], result["shape"]
    lines = [
        f"# RoPE + SDPA: layout of q and k ({env['card']}, torch {env['torch']}, triton {env['triton']})",
        "",
        (f"qkv ({shape['batch']}, {shape['seq']}, 3, {shape['heads']}, {shape['head_dim']}) {result['dtype']}, "
         f"causal SDPA; blockfuse path: {env['blockfuse_implementation']}; HF formula from {result['hf_rotary']}."),
        "",
        "| way | mode | GPU kernels / call | copies / call | median ms | p20-p80 ms | rel. error vs fp32 |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in result["records"]:
        per_call = r["per_call"] or {}
        kernels = f"{per_call['kernels']:g}" if "kernels" in per_call else "n/a"
        copies = f"{per_call['copies']:g}" if "copies" in per_call else "n/a"
        error = "" if r["rel_err"] is None else f"{r['rel_err']:.2e}"
        lines.append(f"| {r['way']} | {r['mode']} | {kernels} | {copies} | {r['ms']:.4f} | "
                     f"{r['ms_p20']:.4f}-{r['ms_p80']:.4f} | {error} |")
    return "\n".join(lines) + "\n"


def write_outputs(result: dict, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "rotary_layout.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / "rotary_layout.md").write_text(markdown(result))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--batch", type=int)
    parser.add_argument("--seq", type=int)
    parser.add_argument("--heads", type=int)
    parser.add_argument("--head-dim", type=int)
    parser.add_argument("--dtype", choices=tuple(DTYPES), default="bf16")
    parser.add_argument("--iters", type=int, help="timed calls (default 200 on CUDA, 3 on CPU)")
    parser.add_argument("--profile-calls", type=int, default=10)
    parser.add_argument("--backward", action="store_true", help="also forward + backward")
    parser.add_argument("--ways", default=",".join(WAYS), help=f"comma-separated from {','.join(WAYS)}")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    cuda = args.device == "cuda"
    # Defaults: the SPEC's RoPE shape on CUDA (q, k [4, 32, 2048, 128]); a tiny one on CPU.
    for name, gpu, cpu in (("batch", 4, 1), ("seq", 2048, 8), ("heads", 32, 2), ("head_dim", 128, 16),
                           ("iters", 200, 3)):
        if getattr(args, name) is None:
            setattr(args, name, gpu if cuda else cpu)
    args.ways = tuple(w.strip() for w in args.ways.split(",") if w.strip())
    unknown = [w for w in args.ways if w not in WAYS]
    if unknown:
        parser.error(f"unknown --ways {unknown}; choose from {','.join(WAYS)}")
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    result = measure(args)
    write_outputs(result, args.out)
    print(markdown(result))
    return result


if __name__ == "__main__":
    main()
