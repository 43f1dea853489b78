"""Compile (inductor) a fused FP8 te-4layer-like block per recipe, with and without PDL; full tracebacks."""
import copy, sys, traceback, os
from dataclasses import replace
import torch
import blockfuse.fp8
import blockfuse.ops.launch as launch
from blockfuse.models import PRESETS, TransformerBlock
from blockfuse.models.blocks import convert

failed = set()
for pdl in (True, False):
    launch.PDL = pdl
    for preset in ("te-4layer", "olmo2-1b"):
        for recipe in ("delayed", "tensorwise", "rowwise"):
            if not pdl and (preset, recipe) not in failed:
                continue
            torch._dynamo.reset()
            config = replace(PRESETS[preset].config, d_model=256, n_heads=4, ffn_hidden=512)
            torch.manual_seed(0)
            eager = TransformerBlock(config, "eager").bfloat16().cuda()
            fused = blockfuse.fp8.convert(convert(eager, "fused"), recipe=recipe)
            x = torch.randn(2, 256, 256, device="cuda").bfloat16()
            try:
                c = torch.compile(fused, fullgraph=True)
                leaf = x.clone().requires_grad_()
                out = c(leaf)
                out.float().sum().backward()
                leaf2 = x.clone().requires_grad_()
                ref = fused(leaf2)
                ref.float().sum().backward()
                e = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
                g = ((leaf.grad.float() - leaf2.grad.float()).norm() / leaf2.grad.float().norm()).item()
                print(f"PDL={pdl} {preset} {recipe}: OK out err {e:.2e} grad err {g:.2e}", flush=True)
            except Exception as error:
                print(f"PDL={pdl} {preset} {recipe}: FAIL {type(error).__name__}", flush=True)
                failed.add((preset, recipe))
                text = traceback.format_exc()
                print(text[-6000:], flush=True)
