"""The op path every op shares (``blockfuse.ops.launch``): the cached launch, the launcher ops, and what
``torch.compile`` makes of them on CUDA."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import blockfuse
from blockfuse.ops import launch
from tests.helpers import relative_error

ROOT = Path(__file__).resolve().parents[2]


def test_spec_separates_what_triton_specializes_on():
    spec = launch._spec
    assert spec(1) != spec(2)  # ints equal to 1 become constants
    assert spec(16) != spec(24)  # divisibility by 16
    assert spec(2**31) != spec(2**31 - 16)  # 32- vs 64-bit ints
    x = torch.arange(16, dtype=torch.float32)
    assert spec(x) != spec(x[1:])  # 16-byte alignment of pointers
    assert spec(x) != spec(x.half())
    assert spec(None) != spec(0)
    assert spec(True) != spec(False)


def test_launch_hooks_seen_only_when_installed(monkeypatch):
    """Triton keeps its launch hooks as a chain object that is never None: the cached launch must take
    an empty chain as no hook (else every launch falls back to Triton's own path)."""
    import types

    chain = types.SimpleNamespace(calls=[])
    monkeypatch.setattr(launch, "_knobs", types.SimpleNamespace(
        runtime=types.SimpleNamespace(launch_enter_hook=chain, launch_exit_hook=None)), raising=False)
    assert not launch._launch_hooks()
    chain.calls.append(print)
    assert launch._launch_hooks()


def test_host_arithmetic():
    assert [launch.cdiv(a, 4) for a in (0, 1, 4, 5, 9)] == [0, 1, 1, 2, 3]
    assert [launch.next_power_of_2(n) for n in (0, 1, 2, 3, 72, 1024, 1025)] == [1, 1, 2, 4, 128, 1024, 2048]


def test_row_units():
    """The unit widths and row strides go to a kernel in: the largest power of two up to 16 dividing all of them."""
    assert launch.row_units(9000, 9000, 9000) == 8
    assert launch.row_units(4096, 4100) == 4
    assert launch.row_units(4096, 0, 8192) == 16  # 0: an absent tensor's stride
    assert launch.row_units(72) == 8 and launch.row_units(1127) == 1 and launch.row_units(14336, 14336) == 16


def test_every_launcher_is_a_registered_op():
    names = sorted(launch.LAUNCHERS)
    assert {"norm_fwd", "norm_bwd"} <= set(names), names
    for name, launcher in launch.LAUNCHERS.items():
        assert launcher.op is getattr(torch.ops.blockfuse, name).default


@torch.library.custom_op("blockfuse_test::write_amax", mutates_args=("out",))
def _write_amax(x: torch.Tensor, out: torch.Tensor) -> None:
    out.copy_(x.abs().max())


def test_a_scalar_output_costs_no_kernel_under_inductor():
    """Inductor lowers ``empty`` as a zero fill made no kernel by zeroing its ranges, one per dimension: a 0-d
    ``empty`` has none and is a one-element fill kernel (on a GPU 97 launches a compiled te-4layer FP8 step, its
    scales written by blockfuse's kernels: benchmarks/results/fp8/24-*/compiled-code). ``launch.empty_scalar``
    (traced: one dimension, viewed as 0-d) is no kernel; a mutating op (as a traced launcher's kernel) writes it."""
    from torch._inductor.utils import run_and_get_code

    def fill_kernels(allocate):
        def step(x):
            scale = allocate(x)
            _write_amax(x, scale)
            return scale * 2

        x = torch.randn(64, generator=torch.Generator().manual_seed(3))
        torch._dynamo.reset()
        try:
            out, codes = run_and_get_code(torch.compile(step, fullgraph=True), x)
        finally:
            torch._dynamo.reset()
        assert out.shape == () and out.item() == 2 * x.abs().max().item()
        return sum(code.count("fused_new_empty") for code in codes)

    assert fill_kernels(lambda x: x.new_empty((), dtype=torch.float32)) > 0  # (Inductor as it is: the fill)
    assert fill_kernels(launch.empty_scalar) == 0


def test_launchers_allocate_no_zero_dimensional_empty():
    """Every 0-d tensor a launcher allocates goes through ``launch.empty_scalar`` (see above)."""
    offenders = []
    for path in sorted((ROOT / "src" / "blockfuse" / "ops").glob("*.py")):
        if path.name == "launch.py":  # (empty_scalar's own, eager branch)
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if "empty(()" in line or "empty((), " in line or "if rowwise else ()" in line and "empty(" in line:
                offenders.append(f"{path.name}:{number}: {line.strip()}")
    assert not offenders, offenders


@pytest.mark.usefixtures("requires_triton")
def test_launcher_runs_its_body_eagerly_and_its_op_under_compile(monkeypatch, device):
    from blockfuse.ops import norm

    calls = []
    body = norm._norm_fwd.body
    monkeypatch.setattr(norm._norm_fwd, "body", lambda *args: calls.append("eager") or body(*args))
    x = torch.randn(3, 40, device=device)
    blockfuse.rms_norm(x)
    assert calls == ["eager"]
    calls.clear()
    torch._dynamo.reset()
    compiled = torch.compile(lambda t: blockfuse.rms_norm(t), backend="aot_eager", fullgraph=True)
    out = compiled(x)
    torch.testing.assert_close(out, blockfuse.rms_norm_ref(x))
    # Traced, the op was called (its fake / decomposition), never the Python body directly.
    assert "eager" not in calls
    torch._dynamo.reset()


@pytest.mark.usefixtures("requires_triton")
def test_absent_outputs_are_one_cached_tensor_eagerly_and_new_through_the_op(device):
    """A launcher called directly hands out one cached empty tensor for its absent outputs (no allocation on the
    host path); through its op (torch.compile, DTensor) they are new, distinct tensors (an op's outputs may not
    alias each other), and an exception in the body leaves the direct mode."""
    from blockfuse.ops import norm

    x = torch.randn(3, 40, device=device)
    args = (x, None, None, None, None, 1e-6, norm.NONE, 0.0, True, False, 0, False)  # RMSNorm, no s, mean, rstd
    first, second = norm._norm_fwd(*args), norm._norm_fwd(*args)
    assert first[1].numel() == 0 and first[1].device == x.device
    assert first[1] is first[2] is first[3] is second[1]
    through_op = norm._norm_fwd.op(*args)[1:]
    assert all(t.numel() == 0 for t in through_op)
    assert len({id(t) for t in through_op}) == 3 and all(t is not first[1] for t in through_op)
    with pytest.raises(ValueError, match="residual_mode"):
        norm._norm_fwd(x, None, None, None, None, 1e-6, norm.PRE, 0.0, True, False, 1, False)
    assert launch._direct.depth == 0


def _record_launcher_calls(monkeypatch) -> dict[str, tuple[str, tuple]]:
    """Patch ``launch.Launcher`` to keep every distinct launcher call (by op and argument description) with its real
    arguments (and still run it); the calls land in the returned dict as they are made."""
    seen: dict[str, tuple[str, tuple]] = {}
    original = launch.Launcher.__call__

    def recording_call(self, *args):
        key = json.dumps({"name": self.name, "args": [_describe(a) for a in args]}, sort_keys=True, default=str)
        if key not in seen:
            seen[key] = (self.name, tuple(a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args))
        return original(self, *args)

    monkeypatch.setattr(launch.Launcher, "__call__", recording_call)
    return seen


def test_zero_stand_ins_share_one_zero_eagerly_and_are_new_ones_traced(device):
    """An FP8 op's stand-in for autograd reads as zeros and owns no memory: eagerly every one expands the same
    cached zero (no fill a call), none a view; under a dispatch mode (tracing) each is a new zero."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    like = torch.randn(3, 5, dtype=torch.bfloat16, device=device)
    a, b = launch.zero_stand_in(like, (3, 5)), launch.zero_stand_in(like, (2, 7, 5))
    assert a.shape == (3, 5) and b.shape == (2, 7, 5) and a.dtype == like.dtype and a.device == like.device
    assert not a.any() and not b.any() and a.stride() == (0, 0) and not a._is_view()
    assert a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()  # one zero element, shared
    other = launch.zero_stand_in(like.float(), (4,))
    assert other.dtype == torch.float32 and other.untyped_storage().data_ptr() != a.untyped_storage().data_ptr()
    with FakeTensorMode() as mode:
        fake = launch.zero_stand_in(mode.from_tensor(like), (3, 5))
    assert fake.shape == (3, 5) and not launch._is_fake(a) and launch._is_fake(fake)


def test_zero_stand_in_caches_no_zero_made_while_a_cuda_graph_is_captured(monkeypatch, device):
    """A stand-in first asked for inside a CUDA graph's capture is a zero of its own (its fill recorded in the graph)
    and leaves nothing cached; the first one after it is cached and reads as zeros."""
    if device != "cuda":
        pytest.skip("CUDA graphs: runs on a GPU (the device runs)")
    monkeypatch.setattr(launch, "_ZEROS", {})
    like = torch.randn(4, 8, dtype=torch.bfloat16, device=device)
    out = torch.empty_like(like)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = launch.zero_stand_in(like, (4, 8))
        out.copy_(like + captured)
    assert launch._ZEROS == {}
    out.zero_()
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, like)
    after = launch.zero_stand_in(like, (4, 8))
    assert len(launch._ZEROS) == 1 and not after.any()


def _schema_and_fake_check(op, args) -> None:
    """``opcheck``'s test_schema and test_faketensor (torch 2.13's ``optests``) in one real call of ``op``: the
    schema check's mode (inputs not declared mutated left unchanged, outputs aliasing no input) over the fake check's
    (the fake implementation's outputs against the real ones), where the two opcheck utilities each run the kernels
    in the interpreter (a third of the test's time)."""
    from torch._subclasses.fake_utils import CrossRefFakeMode
    from torch._subclasses.schema_check_mode import SchemaCheckMode
    from torch.testing._internal.optests.fake_tensor import is_builtin
    from torch.testing._internal.optests.generate_tests import deepcopy_tensors

    args = deepcopy_tensors(args)
    # NOTE: the mode entered last handles the op first: the schema check's mode calls it through the fake check's,
    # which runs the fake implementation and then the real one (each mode is off while it handles a call: the
    # launcher's own aten calls see neither, as in opcheck).
    with CrossRefFakeMode(ignore_op_fn=is_builtin), SchemaCheckMode() as schema_mode:
        op(*args)
    assert schema_mode.ops == [op._schema.name], schema_mode.ops  # (the schema check saw the call, and only it)


@pytest.mark.long
@pytest.mark.usefixtures("requires_triton")
def test_every_launcher_passes_opcheck(request, device):
    """Schema, fake implementation (the launcher itself, run on fake tensors) and the AOT dispatch of every
    launcher op agree with what the kernels do, for every kind of call the ops make."""
    if device != "cpu":
        pytest.skip("runs the recorded interpreter calls")
    _, calls = request.getfixturevalue("every_op_recorded")  # (tests/conftest.py)
    assert {"norm_fwd", "norm_bwd"} <= {name for name, _ in calls}
    failures, kinds = [], set()
    for name, args in calls:
        # The AOT dispatch (60% of the test's time) once a kind of call: the same tensors' dtypes, ranks and
        # contiguity, the same other arguments; the schema and the fake implementation (the launcher's rules, which
        # differ with the width) at every recorded call.
        kind = (name, tuple((str(a.dtype), a.dim(), a.is_contiguous()) if isinstance(a, torch.Tensor)
                            else tuple(a) if isinstance(a, list) else a for a in args))
        op = getattr(torch.ops.blockfuse, name).default
        try:
            _schema_and_fake_check(op, args)
            if kind not in kinds:
                torch.library.opcheck(op, args, test_utils=("test_aot_dispatch_dynamic",))
            kinds.add(kind)
        except Exception as error:  # report every launcher, not only the first
            failures.append(f"{name}: {type(error).__name__}: {str(error)[:400]}")
    assert not failures, "\n".join(failures)


# ---------------------------------------------------------------------------------------------
# On CUDA, torch.compile must see every launcher as Triton kernels, not as an opaque custom op.
# ---------------------------------------------------------------------------------------------

DECOMPOSE_SCRIPT = r"""
import json, sys
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch._functorch.aot_autograd import aot_function

import blockfuse
import blockfuse.fp8  # (loaded on first use by import blockfuse: registers the FP8 layers' launchers too)
from blockfuse.ops import launch

# NOTE: no GPU here, and a CPU-only torch cannot run some view ops on fake CUDA tensors: the inputs are
# meta tensors, which trace the same way (the launchers' tile rules take their non-CUDA branches).
DTYPES = {"torch.float32": torch.float32, "torch.float16": torch.float16, "torch.bfloat16": torch.bfloat16,
          "torch.int64": torch.int64, "torch.int32": torch.int32, "torch.int8": torch.int8, "torch.bool": torch.bool,
          "torch.float8_e4m3fn": torch.float8_e4m3fn, "torch.float8_e5m2": torch.float8_e5m2,
          "torch.uint8": torch.uint8}

class Captured(Exception):
    pass


records = json.loads(sys.stdin.read())


def replay(record):
    mode = FakeTensorMode()
    with mode:
        args = []
        for arg in record["args"]:
            if isinstance(arg, dict) and "tensor" in arg:
                t = arg["tensor"]
                args.append(torch.empty_strided(t["shape"], t["stride"], dtype=DTYPES[t["dtype"]], device="meta"))
            elif isinstance(arg, dict) and "dtype" in arg:
                args.append(DTYPES[arg["dtype"]])
            else:
                args.append(arg["value"])
    tensor_positions = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
    op = getattr(torch.ops.blockfuse, record["name"]).default
    graphs = []

    def capture(gm, example_inputs):
        graphs.append(gm)
        raise Captured()  # the graph is all we want: running it would need a GPU

    def call(*tensors):
        full = list(args)
        for position, tensor in zip(tensor_positions, tensors):
            full[position] = tensor
        return op(*full)

    try:
        with mode:
            aot_function(call, fw_compiler=capture)(*[args[i] for i in tensor_positions])
        error = None
    except Captured:
        error = None
    except Exception as failure:
        error = None if graphs else f"{type(failure).__name__}: {str(failure)[:300]}"
    targets = []
    for node in (node for gm in graphs for node in gm.graph.nodes if node.op == "call_function"):
        targets.append(str(node.target))
        if "auto_functionalized" in str(node.target):  # a mutating op, functionalized: the op is its argument
            targets.append(str(node.args[0]))
    return error, targets


results = []
for record in records:
    error, targets = replay(record)
    results.append({"name": record["name"], "error": error, "targets": targets})
print(json.dumps(results))
"""


def _describe(arg):
    if isinstance(arg, torch.Tensor):
        return {"tensor": {"shape": list(arg.shape), "stride": list(arg.stride()), "dtype": str(arg.dtype)}}
    if isinstance(arg, torch.dtype):
        return {"dtype": str(arg)}
    if isinstance(arg, (list, tuple)):
        return {"value": list(arg)}
    return {"value": arg}


@pytest.mark.usefixtures("requires_triton")
def test_every_launcher_decomposes_into_triton_kernels_on_cuda(request, device):
    """Records every launcher call the op tests' kinds of calls make (in the interpreter), then replays
    each on meta tensors of the same shapes, strides and dtypes through AOTAutograd in a process
    without the interpreter: there the launchers are ``triton_op``s (as on CUDA), and the traced graph
    must hold Triton kernel calls (``triton_kernel_wrapper_functional``) and no opaque ``blockfuse``
    op, which is what lets Inductor emit and launch the kernels itself; a launcher declared opaque
    (``launch.OPAQUE_LAUNCHERS``) must stay the one op. Needs no GPU."""
    if device != "cpu":
        pytest.skip("the GPU tests compile the ops for real")
    _, calls = request.getfixturevalue("every_op_recorded")  # (tests/conftest.py)
    seen: dict[str, dict] = {}
    for name, args in calls:
        record = {"name": name, "args": [_describe(a) for a in args]}
        seen.setdefault(json.dumps(record, sort_keys=True, default=str), record)
    assert {"norm_fwd", "norm_bwd"} <= {r["name"] for r in seen.values()}
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    result = subprocess.run([sys.executable, "-c", DECOMPOSE_SCRIPT], input=json.dumps(list(seen.values())),
                            env=env, cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    failures = []
    for replay in json.loads(result.stdout.strip().splitlines()[-1]):
        kernels = [t for t in replay["targets"] if "triton_kernel_wrapper" in t]
        opaque = [t for t in replay["targets"] if t.startswith("blockfuse.")]
        if replay["name"] in launch.OPAQUE_LAUNCHERS:  # declared opaque: the op itself, no kernel traced
            if replay["error"] or kernels or not opaque:
                failures.append(f"{replay['name']} (opaque): error={replay['error']} kernels={len(kernels)}")
        elif replay["error"] or not kernels or opaque:
            failures.append(f"{replay['name']}: error={replay['error']} kernels={len(kernels)} opaque={opaque}")
    assert not failures, "\n".join(failures)


# ---------------------------------------------------------------------------------------------
# The cached launch on a GPU
# ---------------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["ln", "rms"])
def test_cached_launch_respects_alignment_and_strides(variant):
    """Run aligned inputs first (filling the cache), then misaligned views and odd strides:
    a reused aligned specialization would read the wrong elements or fault."""
    gen = torch.Generator(device="cuda").manual_seed(0)
    base = torch.randn(64 * 1031 + 5, device="cuda", generator=gen).bfloat16()
    weight = torch.randn(1024, device="cuda", generator=gen).bfloat16()
    op = blockfuse.rms_norm if variant == "rms" else blockfuse.layer_norm
    ref = blockfuse.rms_norm_ref if variant == "rms" else blockfuse.layer_norm_ref
    views = [
        base[: 64 * 1024].view(64, 1024),  # aligned, contiguous
        base[1 : 1 + 64 * 1024].view(64, 1024),  # 2-byte offset: pointer not 16-byte aligned
        base[: 64 * 1031].view(64, 1031)[:, 3:1027],  # row stride 1031, misaligned start
        base[: 64 * 1024].view(64, 1024),  # aligned again: a cache hit
    ]
    for x in views:
        out = op(x, weight)
        expected = ref(x.double(), weight.double())
        assert relative_error(out, expected) < 1e-2


@pytest.mark.gpu
def test_the_cached_launch_is_taken(monkeypatch):
    """A second call with the same shapes launches from blockfuse's cache, not through Triton's path."""
    from blockfuse.ops import norm

    if not launch.FAST_LAUNCH:
        pytest.skip("this Triton takes its own launcher (ops.launch.FAST_LAUNCH)")
    x = torch.randn(96, 320, device="cuda", dtype=torch.bfloat16)
    blockfuse.rms_norm(x)

    def refuse(*args, **kwargs):
        raise AssertionError("a repeated launch went through Triton's own path")

    monkeypatch.setattr(launch.Kernel, "_launch_plain", refuse)
    out = blockfuse.rms_norm(x)
    assert relative_error(out, blockfuse.rms_norm_ref(x)) < 1e-2


@pytest.mark.gpu
def test_cached_launch_runs_on_the_current_stream():
    """The cached launch takes the caller's current stream, as Triton's own launch does."""
    x = torch.randn(256, 512, device="cuda", dtype=torch.bfloat16)
    blockfuse.rms_norm(x)  # fills the cache
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        y = blockfuse.rms_norm(x)
        big = torch.randn(4096, 4096, device="cuda")
        for _ in range(3):
            big = big @ big  # keep the side stream busy: a launch on the default stream would run first
        z = y.float().sum()
    torch.cuda.current_stream().wait_stream(side)
    assert torch.isfinite(z)
    assert relative_error(y, blockfuse.rms_norm_ref(x)) < 1e-2
