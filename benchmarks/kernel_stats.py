"""Registers, spills and SASS instruction counts of a norm kernel, compiled for sm_90 on this machine.

No GPU needed: Triton's compiler and the ptxas / nvdisasm / cuobjdump shipped in the triton wheel
compile the kernel as a launch on an H100 / H200 would (divisibility by 16 assumed for the pointers,
row strides and N, as the launch specializes them), then the cubin is disassembled and counted.

    python benchmarks/kernel_stats.py [--activation tanh|none|off] [--warps 8] [--maxnreg 128] \\
        [--stages 3] [--n 4096] [--even-n] [--dump FILE]
    python benchmarks/kernel_stats.py --rule [--widths 768,1152,...] [--forms ln-gelu,...] [--set NAME=VALUE ...] \\
        [--bwd-depth STAGES]
    python benchmarks/kernel_stats.py --loop [--widths 1152,4096,4304] [--forms ln,rms] [--set NAME=VALUE ...]
    python benchmarks/kernel_stats.py --amax [--widths 1152,2048,4096]

``--rule``: both norm kernels as the launchers tile them (``norm._tile``) for each width and form
(LayerNorm, RMSNorm, pre-residual LayerNorm, post-residual LayerNorm, LayerNorm + GELU): registers and
stack bytes a thread, so that a launch rule that spills shows before any GPU time.

``--amax``: the pre-residual forward for a tensorwise FP8 projection (the FP8 forward's kernel with the code
``FP8_AMAX``: the output in bf16, its amax folded; ``norm_for_tensorwise_projection``) beside the plain
pre-residual forward: registers, barriers, SASS instructions an element.

``--loop``: the backward's loop over row blocks, instructions issued per useful row element (see ``loop_main``):
at padded widths the padded lanes execute too, and past about 43 an element the issue rate bounds the kernel.

Prints registers per thread, stack (spill) bytes and the most frequent SASS opcodes of the LayerNorm
(+ GELU) backward kernel. Used to pick the changes in ops/activation.py and ops/norm.py before
spending GPU time (e.g. the sigmoid's denormal fix-ups and the column masks).
"""

from __future__ import annotations

import argparse
import ast
import collections
import inspect
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from blockfuse.ops import launch, norm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from norm_knobs import has_knob, knob, rule_constants  # noqa: E402 (benchmarks/ is no package)

_BIN = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"


def _accepted(function, **keywords) -> dict:
    """The ``keywords`` that ``function`` takes (older code under A/B runs lacks some)."""
    parameters = inspect.signature(function).parameters
    return {name: value for name, value in keywords.items() if name in parameters}


def compile_sm90(kernel, signature: dict, constexprs: dict, divisible: list[str], **options):
    """The compiled kernel for sm_90 (``options``: num_warps, maxnreg, ...). A defaulted constexpr parameter that
    ``constexprs`` does not name takes its default (Triton's ASTSource would take it as None)."""
    constexprs = {**_constexpr_defaults(kernel), **constexprs}
    attrs = {(kernel.arg_names.index(name),): [["tt.divisibility", 16]] for name in divisible}
    source = ASTSource(fn=kernel, signature={**signature, **{k: "constexpr" for k in constexprs}},
                       constexprs=constexprs, attrs=attrs)
    return triton.compile(source, target=GPUTarget("cuda", 90, 32), options=options)


def _constexpr_defaults(kernel) -> dict:
    """name -> default of a jit function's defaulted ``tl.constexpr`` parameters (a default written as
    ``tl.constexpr(v)`` as ``v``)."""
    defaults = {}
    for parameter in inspect.signature(kernel.fn).parameters.values():
        if parameter.default is not inspect.Parameter.empty and "constexpr" in str(parameter.annotation):
            default = parameter.default
            defaults[parameter.name] = getattr(default, "value", default)
    return defaults


def resource_usage(cubin: bytes) -> tuple[int, int]:
    """(registers, stack bytes) of a cubin: cuobjdump's resource usage, without disassembling it."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "kernel.cubin")
        Path(path).write_bytes(cubin)
        usage = subprocess.run([_BIN / "cuobjdump", "--dump-resource-usage", path], capture_output=True, text=True,
                               check=True).stdout
    found = re.search(r"REG:(\d+).*?STACK:(\d+)", usage)
    return int(found.group(1)), int(found.group(2))


def sass_stats(cubin: bytes) -> tuple[int, int, collections.Counter, str]:
    """(registers, stack bytes, opcode counts, disassembly) of a cubin."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "kernel.cubin")
        Path(path).write_bytes(cubin)
        sass = subprocess.run([_BIN / "nvdisasm", "-c", path], capture_output=True, text=True, check=True).stdout
    registers, stack = resource_usage(cubin)
    opcodes = collections.Counter()
    for line in sass.splitlines():
        match = re.match(r"\s*/\*[0-9a-f]+\*/\s+(@!?U?P\w+\s+)?([A-Z0-9_.]+)", line)
        if match:
            opcodes[match.group(2).split(".")[0]] += 1
    return registers, stack, opcodes, sass


RULE_WIDTHS = (768, 1024, 1152, 1536, 2048, 2560, 2880, 3072, 4096, 4304, 5120, 6144, 8192, 11008, 14336)
FORMS = {"ln": (False, 0, 0), "rms": (True, 0, 0), "ln-pre": (False, norm.PRE, 0), "rms-pre": (True, norm.PRE, 0),
         "ln-post": (False, norm.POST, 0), "ln-gelu": (False, 0, norm.GELU_CODES["tanh"])}


def _aligned(signature: dict, integers: list[str], n: int = 16) -> list[str]:
    """The arguments a GPU launch specializes as multiples of 16: every pointer (PyTorch's allocations are
    aligned) and ``integers`` (row strides and widths of contiguous rows of ``n``, as the launchers pass them: in
    units of launch.row_units(n), so multiples of 16 where n / units is)."""
    pointers = [name for name, kind in signature.items() if kind.startswith("*")]
    return pointers + (integers if (n // launch.row_units(n)) % 16 == 0 else [])


def _reload(tile, activation: int, is_rms: bool) -> bool:
    """The backward launcher's RELOAD (norm._bwd_reload; its arguments changed: this script runs on older code too)."""
    try:
        return norm._bwd_reload(tile)
    except TypeError:
        return norm._bwd_reload(tile, activation, 2 if not is_rms else 1)


def _depth(tile, n: int, mode: int, activation: int) -> int:
    """The backward launcher's pipeline depth (norm._bwd_depth where the code has it)."""
    streams = 3 if mode == norm.PRE else 2
    if hasattr(norm, "_bwd_depth"):
        # (the GELU form's depth does not read the programs a multiprocessor)
        return norm._bwd_depth(tile, n, 2, knob("BWD_PROGRAMS_PER_SM"), streams, activation)
    if activation:
        return knob("ACT_BWD_STAGES")
    return norm._bwd_stages(tile, n, 2, norm._programs_per_sm(tile.block_n, knob("BWD_PROGRAMS_PER_SM")), streams)


def _forward_persistence(tile, n: int, mode: int, activation: int) -> dict:
    """The forward kernel's persistence constexpr for ``tile`` (``norm.forward_stages``, rows to spare assumed), and
    its register cap as the launcher sets it (code before persistence: the cap alone)."""
    stages = None
    if hasattr(norm, "forward_stages"):  # (scalar rows, where the code has them: launch.row_units)
        extra = _accepted(norm.forward_stages, scalar=launch.row_units(n) == 1)
        stages = norm.forward_stages(tile, n, mode, activation, **extra)
    if stages is None:  # (code before persistence)
        cap = norm._fwd_maxnreg(tile)
    else:  # (the one-row programs' cap by form, where the code has it)
        cap = norm._fwd_maxnreg(tile, stages, **_accepted(norm._fwd_maxnreg, mode=mode,
                                                          scalar=launch.row_units(n) == 1))
    return {"constexprs": {} if stages is None else {"STAGES": stages}, "options": {"maxnreg": cap} if cap else {}}


def rule_stats(n: int, form: str, disassemble: bool = True) -> dict:
    """Registers and stack of the forward and backward kernels for width ``n`` as the launchers tile it.
    ``disassemble=False``: no SASS (barriers, instructions and the disassembly None), which is most of the time a
    kernel takes here once compiled (nvdisasm: about 0.45 s a wide-row kernel; the resource usage: milliseconds)."""
    is_rms, mode, activation = FORMS[form]
    bf, f32 = "*bf16", "*fp32"
    common = dict(IS_RMS=is_rms, MODE=mode, HAS_W=True, HAS_B=not is_rms, HAS_DROPOUT=0, CAST_BEFORE_WEIGHT=False,
                  ACTIVATION=activation)
    out = {}
    if has_knob("FWD_RMS_CHUNKS_FROM_LANES"):  # (the launcher's rule, by form)
        try:  # (the launcher's pre mode and scalar rows, where the code has them)
            extra = _accepted(norm.forward_rule, pre=mode == norm.PRE, scalar=launch.row_units(n) == 1)
            tile = norm.forward_rule(n, is_rms, mode != norm.NONE, **extra)
        except TypeError:  # (code before the residual's argument)
            tile = norm.forward_rule(n, is_rms)
    elif hasattr(norm, "forward_rule"):  # (older code: the width's rule; before it, the tile without its tails)
        tile = norm.forward_rule(n)
    else:
        tile = norm._tile(n, knob("FWD_TILE_ELEMENTS"), knob("FWD_ELEMENTS_PER_WARP"), knob("FWD_MAX_LANES"),
                          knob("TAIL_FROM_LANES"))
    signature = {"X": bf, "W": bf, "Y": bf, "RSTD": f32, "stride_x": "i32", "stride_res": "i32", "stride_y": "i32",
                 "stride_s": "i32", "M": "i32", "N": "i32", "eps": "fp32", "dropout_p": "fp32",
                 "dropout_scale": "fp32"}
    nones = dict(SEED=None)
    signature.update({"B": bf} if not is_rms else {})
    nones.update({} if not is_rms else {"B": None})
    signature.update({"MEAN": f32} if not is_rms else {})
    nones.update({} if not is_rms else {"MEAN": None})
    signature.update({"RES": bf} if mode else {})
    nones.update({} if mode else {"RES": None})
    signature.update({"S": bf} if mode == norm.PRE else {})
    nones.update({} if mode == norm.PRE else {"S": None})
    persistence = _forward_persistence(tile, n, mode, activation)
    early = {}
    if hasattr(norm, "early_residual"):  # (the post-residual form's residual loaded with x, by the launcher's rule)
        early["EARLY_RESIDUAL"] = norm.early_residual(tile, n, mode, persistence["constexprs"].get("STAGES", 0))
    if hasattr(norm, "forward_weight_hint"):  # (the weight's and bias's loads' hint, as the launcher's)
        early["WB_EVICT"] = norm.forward_weight_hint(activation)
    elif has_knob("FWD_WB_EVICT"):
        early["WB_EVICT"] = knob("FWD_WB_EVICT")
    if has_knob("FWD_JOINT_SUMS"):  # (the pieces' statistics reduced jointly, as the launcher decides it)
        early["THREADS"] = norm.joint_sums_threads(tile, launch.row_units(n) == 1, forward=True)
    compiled = compile_sm90(norm._norm_fwd_kernel, signature, {**nones, **common, "STATS": True,
                                                               **tile.constexprs(n), "VEC": launch.row_units(n),
                                                               **persistence["constexprs"], **early},
                            _aligned(signature, ["stride_x", "stride_y", "N"], n), num_warps=tile.num_warps,
                            **persistence["options"])
    registers, stack, opcodes, _ = _stats(compiled.asm["cubin"], disassemble)
    out["fwd"] = dict(tile=tile._asdict(), registers=registers, stack=stack, barriers=_count(opcodes, "BAR"),
                      stages=persistence["constexprs"].get("STAGES"), shared=compiled.metadata.shared,
                      instructions=_count(opcodes))
    if hasattr(norm, "backward_rule"):  # (the launcher's rule; older code: the padded tile)
        # RMSNorm's wide tails and the launcher's scalar rows (16-bit, one-element accesses), where the code has them
        extra = _accepted(norm.backward_rule, is_rms=is_rms, scalar=launch.row_units(n) == 1)
        tile = norm.backward_rule(n, activation, mode == norm.PRE, **extra)
    else:
        per_warp = knob("ACT_BWD_ELEMENTS_PER_WARP") if activation else knob("BWD_ELEMENTS_PER_WARP")
        max_lanes = knob("BWD_MAX_LANES_PRE") if mode == norm.PRE else knob("BWD_MAX_LANES")
        tile = norm._tile(n, knob("BWD_TILE_ELEMENTS"), per_warp, max_lanes, float("inf"))
    signature = {"DY": bf, "Z": bf, "W": bf, "RSTD": f32, "DX": bf, "PARTIAL": f32, "stride_dy": "i32",
                 "stride_ds": "i32", "stride_z": "i32", "stride_dx": "i32", "stride_dres": "i32", "M": "i32",
                 "N": "i32", "dropout_p": "fp32", "dropout_scale": "fp32"}
    nones = dict(SEED=None, DRES=None, DW=None, DB=None)
    signature.update({"MEAN": f32} if not is_rms else {})
    nones.update({} if not is_rms else {"MEAN": None})
    signature.update({"B": bf} if activation else {})
    nones.update({} if activation else {"B": None})
    signature.update({"DS": bf} if mode == norm.PRE else {})
    nones.update({} if mode == norm.PRE else {"DS": None})
    options = {"num_warps": tile.num_warps}
    if activation and tile.num_chunks == 1:
        options["maxnreg"] = (norm._act_bwd_maxnreg(tile) if hasattr(norm, "_act_bwd_maxnreg")
                              else knob("ACT_BWD_MAXNREG"))
    stages = _depth(tile, n, mode, activation)
    compiled = compile_sm90(norm._norm_bwd_kernel, signature,
                            {**nones, **common, "HAS_DS": mode == norm.PRE,
                             "STAGES": stages,
                             "DIRECT": False, "TWO_FMA": norm._two_fma(tile, activation),
                             "RELOAD": _reload(tile, activation, is_rms),
                             **({"EARLY_ACC": norm._early_acc(tile, mode, stages)}
                                if hasattr(norm, "_early_acc") else {}),
                             "VEC": launch.row_units(n),
                             **tile.constexprs(n, tail=hasattr(norm, "backward_rule")),
                             **({"BLOCK_U": tile.block_u} if hasattr(tile, "block_u") else {}),
                             # (rows in chunks leave the weight gradients to their own kernel, as the launcher does)
                             **({"WEIGHT_KERNEL": norm.weight_kernel_rule(tile, n, **_accepted(
                                 norm.weight_kernel_rule, scalar=launch.row_units(n) == 1, activation=activation,
                                 is_rms=is_rms, pre=mode == norm.PRE))}
                                if hasattr(norm, "weight_kernel_rule") else {}),
                             # (the bf16 row held rather than read again, as the launcher decides it)
                             **({"HOLD": norm._bwd_hold(tile, n, torch.bfloat16, torch.bfloat16, activation, mode)}
                                if hasattr(norm, "_bwd_hold") else {}),
                             # (the pieces' row sums reduced jointly, where the code has it)
                             **({"THREADS": norm.joint_sums_threads(tile, launch.row_units(n) == 1)}
                                if hasattr(norm, "joint_sums_threads") else {})},
                            _aligned(signature, ["stride_dy", "stride_z", "stride_dx", "N"], n), **options)
    registers, stack, opcodes, sass = _stats(compiled.asm["cubin"], disassemble)
    out["bwd"] = dict(tile=tile._asdict(), registers=registers, stack=stack, barriers=_count(opcodes, "BAR"),
                      sass=sass, instructions=_count(opcodes), stages=stages, shared=compiled.metadata.shared)
    return out


def _stats(cubin: bytes, disassemble: bool) -> tuple:
    """``sass_stats``, or without the disassembly: (registers, stack, None, None)."""
    return sass_stats(cubin) if disassemble else (*resource_usage(cubin), None, None)


def _count(opcodes, name=None):
    """How many ``name`` instructions (all of them: None) ``opcodes`` holds; None where it was not disassembled."""
    if opcodes is None:
        return None
    return opcodes[name] if name else sum(opcodes.values())


_ADDRESS = re.compile(r"\s*/\*([0-9a-f]+)\*/\s+(@!?U?P\w+\s+)?([A-Z0-9_]+)")


def loop_body(sass: str) -> list[str]:
    """The opcodes of the last loop in a disassembly (the instructions from a branch's earlier target to the
    branch): a persistent kernel's loop over row blocks."""
    lines = sass.splitlines()
    instructions = [(int(m.group(1), 16), m.group(3), line) for line in lines if (m := _ADDRESS.match(line))]
    labels = {}
    for index, line in enumerate(lines):
        label = re.match(r"\s*(\.L_x_\d+):", line)
        following = next((m for m in map(_ADDRESS.match, lines[index + 1:]) if m), None)
        if label and following:
            labels[label.group(1)] = int(following.group(1), 16)
    body = []
    for address, opcode, line in instructions:
        target = re.search(r"\((\.L_x_\d+)\)", line) if opcode == "BRA" else None
        if target and labels.get(target.group(1), address + 1) < address:
            start = labels[target.group(1)]
            body = [op for at, op, _ in instructions if start <= at <= address]
    return body


def loop_main(widths, forms) -> None:
    """Instructions the backward's loop issues per useful row element: a thread's loop instructions times the
    program's threads, over the row elements an iteration covers (padded lanes excluded). A multiprocessor
    issues at most 128 thread-instructions a cycle; at an H200's copy bandwidth the backward's 6 bytes an element
    (z, dy, dx in bf16) arrive at about 3 elements a multiprocessor a cycle, so past about 43 instructions an
    element the issue rate, not memory, bounds the kernel."""
    print("| width | form | backward tile (m x n, warps) | loop instructions a thread | a useful element | "
          "barriers / shuffles / local loads + stores in the loop | registers, spill bytes | most frequent |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for n in widths:
        for form in forms:
            stats = rule_stats(n, form)["bwd"]
            tile, body = stats["tile"], loop_body(stats["sass"])
            per_element = len(body) * tile["num_warps"] * 32 / (tile["block_m"] * n)
            counts = collections.Counter(body)
            common = ", ".join(f"{op} {count}" for op, count in counts.most_common(4))
            print(f"| {n} | {form} | {tile['block_m']} x {tile['block_n']}, {tile['num_warps']} | {len(body)} | "
                  f"{per_element:.1f} | {counts['BAR']} / {counts['SHFL']} / {counts['LDL'] + counts['STL']} | "
                  f"{stats['registers']}, {stats['stack']} | {common} |", flush=True)


def amax_main(widths) -> None:
    """``--amax``: the plain pre-residual forward and the one that folds its output's amax, at each width."""
    from blockfuse.ops.fp8 import FP8_AMAX

    bf, f32 = "*bf16", "*fp32"
    print("| width | norm | plain: tile (rows, warps) | regs | barriers | instructions an element | "
          "with the amax: tile | regs | barriers | instructions an element |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for n in widths:
        for is_rms in (False, True):
            common = dict(IS_RMS=is_rms, MODE=norm.PRE, HAS_W=True, HAS_B=not is_rms, HAS_DROPOUT=0,
                          CAST_BEFORE_WEIGHT=False, ACTIVATION=0, STATS=True, VEC=launch.row_units(n))
            strides = ["stride_x", "stride_res", "stride_y", "stride_s", "N"]
            base = {"X": bf, "RES": bf, "W": bf, "S": bf, "RSTD": f32, "stride_x": "i32", "stride_res": "i32",
                    "stride_y": "i32", "stride_s": "i32", "M": "i32", "N": "i32", "eps": "fp32", "dropout_p": "fp32",
                    "dropout_scale": "fp32"}
            parameters = {} if is_rms else {"B": bf, "MEAN": f32}
            absent = {"SEED": None, **({"B": None, "MEAN": None} if is_rms else {})}
            cells = []
            tile = norm.forward_rule(n, is_rms, True, True)  # the plain pre-residual forward's
            signature = {**base, "Y": bf, **parameters}
            persistence = _forward_persistence(tile, n, norm.PRE, 0)
            plain = compile_sm90(norm._norm_fwd_kernel, signature,
                                 {**absent, **common, **tile.constexprs(n), **persistence["constexprs"]},
                                 _aligned(signature, strides, n), num_warps=tile.num_warps, **persistence["options"])
            fp8_tile = norm.fp8_forward_tile(n, residual=True, is_rms=is_rms, pre=True)
            signature = {**base, "Q": bf, "AMAX": f32, "history_len": "i32", **parameters}
            folded = compile_sm90(norm._norm_fwd_fp8_kernel, signature,
                                  {**absent, "Y": None, "Q_SCALE": None, "HISTORY": None, **common,
                                   **fp8_tile.constexprs(n), "FP8": FP8_AMAX.value, "BLOCK_H": 1, "PDL": False},
                                  _aligned(signature, strides, n), num_warps=fp8_tile.num_warps,
                                  maxnreg=knob("FP8_FWD_MAXNREG"))
            for t, compiled in ((tile, plain), (fp8_tile, folded)):
                registers, _, opcodes, _ = sass_stats(compiled.asm["cubin"])
                per_element = sum(opcodes.values()) * 32 * t.num_warps / (t.block_m * n)
                cells.append(f"{t.block_m}, {t.num_warps} | {registers} | {opcodes['BAR']} | {per_element:.1f}")
            print(f"| {n} | {'RMSNorm' if is_rms else 'LayerNorm'} | {cells[0]} | {cells[1]} |", flush=True)


def rule_main(widths, forms=tuple(FORMS)) -> None:
    print("| width | form | forward tile (m x n + tail, chunks, warps) | regs | stack | barriers | instructions | "
          "backward tile (and stages) | regs | stack | barriers | instructions |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for n in widths:
        for form in forms:
            stats = rule_stats(n, form)
            cells = []
            for way in ("fwd", "bwd"):
                t = stats[way]["tile"]
                tail = f" + {t['block_t']}" if t["tail"] else ""
                stages = f", {stages} stages" if (stages := stats[way].get("stages")) else ""
                cells.append(f"{t['block_m']} x {t['block_n']}{tail}, {t['num_chunks']}, {t['num_warps']}{stages} | "
                             f"{stats[way]['registers']} | {stats[way]['stack']} | {stats[way]['barriers']} | "
                             f"{stats[way]['instructions']}")
            print(f"| {n} | {form} | {cells[0]} | {cells[1]} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rule", action="store_true", help="both kernels as the launchers tile each width")
    parser.add_argument("--amax", action="store_true",
                        help="the pre-residual forward folding its output's amax beside the plain one")
    parser.add_argument("--loop", action="store_true",
                        help="the backward's loop instructions per useful element, as the launchers tile each width")
    parser.add_argument("--forms", default=",".join(FORMS), help="--loop, --rule: comma-separated forms")
    parser.add_argument("--widths", default=",".join(map(str, RULE_WIDTHS)))
    parser.add_argument("--activation", choices=("tanh", "none", "off"), default="tanh",
                        help="GELU form after the norm (off: plain LayerNorm)")
    parser.add_argument("--warps", type=int, default=8)
    parser.add_argument("--maxnreg", type=int)
    parser.add_argument("--stages", type=int, default=3)
    parser.add_argument("--n", type=int, default=4096, help="row width (one tile: up to 16384)")
    parser.add_argument("--even-n", action="store_true", help="compile with EVEN_N (no column masks)")
    parser.add_argument("--dump", type=Path, help="write the disassembly here")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="one of ops/norm.py's knobs (its tuning table, by upper-case name; a Python literal; "
                        "repeatable), e.g. ACT_BWD_PIECE_MAX_WARPS=16: the rules as a GPU A/B run would set them")
    parser.add_argument("--bwd-depth", type=int, metavar="STAGES",
                        help="--rule: the backward's pipeline depth instead of the launcher's (norm._bwd_depth)")
    args = parser.parse_args()
    if args.bwd_depth is not None:
        norm._bwd_depth = lambda *_, **__: args.bwd_depth
    knobs = {}
    for item in args.set:
        name, value = item.split("=", 1)
        if not has_knob(name):
            raise SystemExit(f"--set: ops/norm.py has no {name}")
        knobs[name] = ast.literal_eval(value)
    with rule_constants(knobs):
        run(args)


def run(args) -> None:
    """What ``args`` ask for, with the knobs of ``--set`` in force."""
    if args.rule:
        rule_main([int(w) for w in args.widths.split(",")], args.forms.split(","))
        return
    if args.amax:
        amax_main([int(w) for w in args.widths.split(",")])
        return
    if args.loop:
        loop_main([int(w) for w in args.widths.split(",")], args.forms.split(","))
        return
    block_n = triton.next_power_of_2(args.n)
    signature = {"DY": "*bf16", "Z": "*bf16", "W": "*bf16", "B": "*bf16", "MEAN": "*fp32", "RSTD": "*fp32",
                 "DX": "*bf16", "PARTIAL": "*fp32", "stride_dy": "i32", "stride_ds": "i32", "stride_z": "i32",
                 "stride_dx": "i32", "stride_dres": "i32", "M": "i32", "N": "i32", "dropout_p": "fp32",
                 "dropout_scale": "fp32"}
    constexprs = dict(DS=None, SEED=None, DRES=None, DW=None, DB=None, IS_RMS=False, MODE=0, HAS_W=True, HAS_B=True,
                      HAS_DS=False, HAS_DROPOUT=0, CAST_BEFORE_WEIGHT=False,
                      ACTIVATION=0 if args.activation == "off" else norm.GELU_CODES[args.activation],
                      BLOCK_M=max(1, knob("BWD_TILE_ELEMENTS") // block_n), BLOCK_N=block_n, NUM_CHUNKS=1,
                      EVEN_N=args.even_n, **({"TAIL": False, "BLOCK_T": 1} if hasattr(norm, "backward_rule") else {}),
                      **({"BLOCK_U": 1} if "block_u" in norm.Tile._fields else {}),
                      STAGES=args.stages, DIRECT=False, RELOAD=False,
                      **({"EARLY_ACC": False} if hasattr(norm, "_early_acc") else {}), VEC=1,
                      TWO_FMA=args.activation == "off" and args.warps <= knob("BWD_TWO_FMA_MAX_WARPS")
                      and not args.maxnreg)
    options = {"num_warps": args.warps, **({"maxnreg": args.maxnreg} if args.maxnreg else {})}
    compiled = compile_sm90(norm._norm_bwd_kernel, signature, constexprs,
                            ["DY", "Z", "W", "B", "MEAN", "RSTD", "DX", "PARTIAL", "stride_dy", "stride_z",
                             "stride_dx", "N"], **options)
    registers, stack, opcodes, sass = sass_stats(compiled.asm["cubin"])
    print(f"_norm_bwd_kernel activation={args.activation} warps={args.warps} maxnreg={args.maxnreg} "
          f"stages={args.stages} N={args.n} EVEN_N={args.even_n}")
    print(f"registers {registers}, stack {stack} B, {sum(opcodes.values())} SASS instructions")
    print("  " + ", ".join(f"{op} {count}" for op, count in opcodes.most_common(16)))
    if args.dump:
        args.dump.write_text(sass)


if __name__ == "__main__":
    main()
