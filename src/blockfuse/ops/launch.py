"""How every blockfuse op launches its Triton kernels, eagerly and under ``torch.compile``.

Each op has the same layers (STYLE.md):

* a *launcher*: plain Python that allocates the outputs, picks the tiles and launches the
  kernels through :class:`Kernel`; it has no autograd of its own;
* :func:`launcher_op` registers the launcher as the op ``blockfuse::<name>``:

  - compiled kernels (CUDA): a ``torch.library.triton_op``. Under ``torch.compile`` AOTAutograd
    decomposes it into its kernel launches, and Inductor emits the kernels into its generated
    code and launches them like its own (no Python call and no dispatcher per kernel at run time);
  - Triton's interpreter (CPU tensors, ``TRITON_INTERPRET=1``): a ``torch.library.custom_op``,
    because ``wrap_triton`` cannot trace an interpreted kernel; its fake implementation is the
    launcher itself, whose launches do nothing on fake tensors;

* ONE ``torch.autograd.Function`` per op calls the launchers, eagerly and under compile alike:
  :class:`Launcher` calls the registered op while Dynamo traces and the launcher's Python
  directly otherwise (the dispatcher would add tens of microseconds of host time per call).

:class:`Kernel` is the launch itself. While a dispatch mode traces (fake, functional or proxy
tensors: the op's decomposition under compile) it goes through ``torch.library.wrap_triton``;
otherwise it launches the compiled kernel from a cache of its own, keyed on what Triton
specializes on, for the Triton versions where that was measured to beat Triton's own launcher
(:data:`FAST_LAUNCH`), and through ``kernel[grid](...)`` everywhere else.
"""

from __future__ import annotations

import functools
import math
import threading
from typing import Optional

import torch
import triton
from torch import Tensor

from blockfuse.runtime import interpreter_enabled

# NOTE: the cached launch calls a compiled kernel's ``run`` directly: ``(grid x, y, z, stream,
# function, packed metadata, launch metadata, enter hook, exit hook, *args)``. That is Triton's
# internal interface, measured only on Triton 3.6 (an H200 machine's host: 17.8 us a launch against
# 37.1 through ``kernel[grid](...)``, benchmarks/NOTES.md, "The op path"); other
# versions take Triton's own launcher. A call that does not fit it falls back for good.
FAST_LAUNCH = triton.__version__.startswith("3.6.")
if FAST_LAUNCH:
    from triton import knobs as _knobs
# Keys of calls kept by a Kernel before its cache is emptied (each distinct set of shapes and strides
# is one; a long generation that passes a growing position as an int would add one a token).
MAX_CACHED_KEYS = 4096

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
# Every kernel blockfuse launches, by name: what `blockfuse analyze` labels as blockfuse's own.
KERNEL_NAMES: set[str] = set()
_ALL_KERNELS: list = []  # every Kernel (the cached launch is turned off in all of them at once)
# Every launcher op, by name (the op is ``torch.ops.blockfuse.<name>``).
LAUNCHERS: dict[str, "Launcher"] = {}
# The launchers registered opaque (``launcher_op(fake=...)``): Inductor calls them as they are.
OPAQUE_LAUNCHERS: set[str] = set()


def _spec(arg):
    """What Triton specializes a compiled kernel on, for one argument: a tensor's dtype and 16-byte
    alignment; an int's class (equal to 1, divisible by 16, fits in 32 bits); a float's type; None
    and bools as themselves."""
    if isinstance(arg, Tensor):
        return (arg.dtype, not arg.data_ptr() & 15)
    if arg.__class__ is int:
        return (arg == 1) + 2 * (not arg & 15) + 4 * (_INT32_MIN <= arg <= _INT32_MAX)
    if arg.__class__ is float:
        return float
    return arg


_dispatch_modes = torch._C._len_torch_dispatch_stack
_PLAIN_TENSORS = (Tensor, torch.nn.Parameter)


def tracing() -> bool:
    """True while torch.compile (or any dispatch mode) traces: a launcher that plans its own buffers
    eagerly (row blocks, outputs written into views) may leave that to the compiler then."""
    return bool(_dispatch_modes())


def _tracing(args) -> bool:
    """True while a dispatch mode is active (the fake, functional or proxy tensors of tracing), or
    when the first argument is a tensor subclass (a fake tensor outside its mode)."""
    if tracing():
        return True
    first = args[0]
    return isinstance(first, Tensor) and first.__class__ not in _PLAIN_TENSORS


def _is_fake(t) -> bool:
    from torch._subclasses.fake_tensor import is_fake

    return isinstance(t, Tensor) and (t.device.type == "meta" or is_fake(t))


def _declared_constexprs(fn) -> Optional[list[str]]:
    """The names of a (interpreted) kernel's ``tl.constexpr`` parameters in declaration order; None for an
    autotuner or where the signature cannot be read."""
    import inspect

    if _is_autotuner(fn):
        return None
    try:
        parameters = inspect.signature(getattr(fn, "fn", fn)).parameters.values()
    except (TypeError, ValueError):
        return None
    return [p.name for p in parameters
            if p.annotation is triton.language.constexpr
            or (isinstance(p.annotation, str) and "constexpr" in p.annotation)]


class Kernel:
    """A ``@triton.jit`` kernel (or a ``triton.autotune`` of one) as blockfuse launches it:
    ``kernel(grid, *args, num_warps=..., num_stages=..., maxnreg=..., **constexprs)``. The constexpr
    parameters come last in the kernel's signature and are passed by name; the first argument is a
    tensor. An autotuned kernel takes its launch options from its configs (pass none) and ``grid``
    may be a function of the config's constants, as in ``kernel[grid]``."""

    def __init__(self, fn):
        self.fn = fn
        self._autotuned = _is_autotuner(fn)
        self.name = (fn.fn if self._autotuned else fn).__name__  # an autotuner's: that of its kernel
        KERNEL_NAMES.add(self.name)
        _ALL_KERNELS.append(self)
        self._interpreted = interpreter_enabled()
        self._plain = self._interpreted or self._autotuned or not FAST_LAUNCH
        self._cache: dict = {}  # key of a call (device first) -> (run, function, metadata, device)
        self._specializations: dict = {}  # Triton's specialization -> the same entry
        self._compiled: list = []  # the compiled kernels behind the entries
        self._traced_variants: dict = {}
        params = getattr(fn, "params", None)
        if params is None:  # the interpreter's kernels and autotuners: always the plain launch
            self._constexpr_names = _declared_constexprs(fn)
            return
        self._constexpr_names = [p.name for p in params if p.is_constexpr]
        first = len(params) - len(self._constexpr_names)
        if any(not p.is_constexpr for p in params[first:]):
            raise TypeError(f"{self.name}: a Kernel needs the constexpr parameters last")

    def __call__(self, grid, *args, num_warps=4, num_stages=None, maxnreg=None, launch_pdl=False, **constexprs):
        """Launches the kernel on ``grid`` (1 to 3 ints). ``maxnreg``: a register cap a thread for
        ptxas (None: its own choice), ignored by the interpreter. ``launch_pdl``: a programmatic dependent
        launch (:func:`programmatic_launch`), ignored by the interpreter and in traced graphs (Inductor's
        launch)."""
        options = (num_warps, num_stages, maxnreg, launch_pdl)
        if self._plain or _dispatch_modes() or args[0].__class__ not in _PLAIN_TENSORS:
            self._launch_slow(grid, args, constexprs, options)
            return
        # NOTE: the key holds each tensor's dtype and pointer alignment and every other argument as
        # itself (one list comprehension: about 0.2 us an argument, against 0.3 for Triton's class of
        # an int through a function call); a key first seen is mapped to Triton's specialization (the
        # classes of :func:`_spec`) once, so varying ints cost one lookup, not one compile.
        key = (args[0].get_device(), *[(a.dtype, a.data_ptr() & 15) if isinstance(a, Tensor) else a for a in args],
               *constexprs.values(), options)
        entry = self._cache.get(key)
        if entry is None:
            entry = self._entry(grid, args, constexprs, options, key)
            if entry is None:
                return  # launched through Triton's own path
        run, function, metadata, device = entry
        if _launch_hooks():
            self._launch_plain(grid, args, constexprs, options)  # a profiler's hooks
            return
        # The compiled runner takes every parameter in declaration order, constexprs included (it
        # skips them), after the grid, the stream and the launch metadata.
        grid = (grid[0], 1, 1) if len(grid) == 1 else tuple(grid) + (1,) * (3 - len(grid))
        try:
            run(grid[0], grid[1], grid[2], _raw_stream(device), function, metadata, None, None, None, *args,
                *constexprs.values())
        except TypeError as error:  # a launcher interface other than the one measured: Triton's own path
            _give_up_fast_launch(self, error)
            self._launch_plain(grid, args, constexprs, options)

    def _options(self, options) -> dict:
        """Triton's launch options of ``(num_warps, num_stages, maxnreg, launch_pdl)``."""
        num_warps, num_stages, maxnreg, launch_pdl = options
        triton_options = {"num_warps": num_warps}
        if num_stages is not None:
            triton_options["num_stages"] = num_stages
        if maxnreg is not None and not self._interpreted:
            triton_options["maxnreg"] = maxnreg
        if launch_pdl and not self._interpreted:
            triton_options["launch_pdl"] = True
        return triton_options

    def _launch_plain(self, grid, args, constexprs, options):
        if self._autotuned:
            return self.fn[grid](*args, **constexprs)
        return self.fn[tuple(grid)](*args, **constexprs, **self._options(options))

    def _entry(self, grid, args, constexprs, options, key):
        """The cache entry of a key first seen: from the entry of its Triton specialization if one was
        compiled, else launched through Triton's path (which compiles) and recorded. Returns None when
        this call has been launched already."""
        if list(constexprs) != self._constexpr_names:
            raise TypeError(f"{self.name}: pass every constexpr by name in declaration order "
                            f"({', '.join(self._constexpr_names)}), got {', '.join(constexprs)}")
        device = args[0].get_device()
        specialization = (device, tuple([_spec(a) for a in args]), *constexprs.values(), options)
        entry = self._specializations.get(specialization)
        if entry is None:
            compiled = self._launch_plain(grid, args, constexprs, options)
            if compiled is None or not hasattr(compiled, "_init_handles"):
                return None
            compiled._init_handles()
            entry = (compiled.run, compiled.function, compiled.packed_metadata, device)
            self._specializations[specialization] = entry
            self._compiled.append(compiled)
            launched = True
        else:
            launched = False
        if len(self._cache) >= MAX_CACHED_KEYS:
            self._cache.clear()
        self._cache[key] = entry
        return None if launched else entry

    def _launch_slow(self, grid, args, constexprs, options):
        if self._interpreted and self._constexpr_names is not None and list(constexprs) != self._constexpr_names:
            # NOTE: the GPU's cached launch passes the constexprs positionally and refuses any other order;
            # checked here too, so that a test in the interpreter catches what only a GPU would.
            raise TypeError(f"{self.name}: pass every constexpr by name in declaration order "
                            f"({', '.join(self._constexpr_names)}), got {', '.join(constexprs)}")
        if _tracing(args):
            self._launch_traced(grid, args, constexprs, options)
        else:
            self._launch_plain(grid, args, constexprs, options)

    def _launch_traced(self, grid, args, constexprs, options):
        if self._interpreted:
            # The interpreter runs kernels on real CPU tensors only; on the fake tensors of a custom
            # op's fake implementation there is nothing to run (the launcher allocated the outputs).
            if not any(_is_fake(a) for a in args):
                self._launch_plain(grid, args, constexprs, options)
            return
        from torch.library import wrap_triton

        if self._autotuned:
            wrap_triton(self.fn)[grid](*args, **constexprs)
            return
        num_warps, num_stages, maxnreg, _ = options  # (Inductor's launch: no programmatic dependent launch)
        triton_options = {"num_warps": num_warps}
        if num_stages is not None:
            triton_options["num_stages"] = num_stages
        kernel = self.fn
        if maxnreg is not None:
            # NOTE: Inductor takes num_warps / num_stages as launch options of a user kernel but not
            # maxnreg; a one-config autotuner carries it (and the other options) into its launch.
            kernel = self._with_options(num_warps, num_stages, maxnreg)
            triton_options = {}
        wrap_triton(kernel)[tuple(grid)](*args, **constexprs, **triton_options)

    def _with_options(self, num_warps, num_stages, maxnreg):
        key = (num_warps, num_stages, maxnreg)
        if key not in self._traced_variants:
            config = triton.Config({}, num_warps=num_warps, num_stages=num_stages if num_stages is not None else 3,
                                   maxnreg=maxnreg)
            self._traced_variants[key] = triton.autotune(configs=[config], key=[])(self.fn)
        return self._traced_variants[key]

    def reset(self) -> None:
        """Forgets every cached launch (a tile sweep that changes module constants between launches)."""
        self._cache.clear()
        self._specializations.clear()
        self._compiled.clear()

    def compiled(self) -> list:
        """The compiled kernels (Triton's ``CompiledKernel``: ``n_regs``, ``n_spills``, ``asm``) of the
        cached launches so far."""
        return list(self._compiled)


# Programmatic dependent launch (sm_90 and later): on where the card has it (a knob for A/B runs).
PDL = True


@functools.lru_cache(maxsize=None)
def _has_pdl(device_index: int) -> bool:
    return torch.cuda.get_device_capability(device_index) >= (9, 0)


def programmatic_launch(t: Tensor) -> bool:
    """True where a kernel on ``t``'s device may be launched with programmatic dependent launch (``launch_pdl``):
    it may start before the kernel before it in the stream has finished, from when every program of that one has
    called ``gdc_launch_dependents`` (or ended), and must call ``gdc_wait`` before it reads what that kernel
    writes (sm_90 and later; CUDA graphs keep the dependency as a programmatic edge)."""
    return PDL and t.is_cuda and _has_pdl(t.get_device())


def _is_autotuner(fn) -> bool:
    from triton.runtime.autotuner import Autotuner

    return isinstance(fn, Autotuner)


def _launch_hooks() -> bool:
    """True when a launch hook is installed (Triton's profiler, say): the cached launch passes none.

    NOTE: Triton keeps the hooks as a HookChain object that is never None (seen on 3.9; a None check
    sent every launch to Triton's own path on 3.6): installed means its chain has calls."""
    runtime = _knobs.runtime
    enter, leave = runtime.launch_enter_hook, runtime.launch_exit_hook
    return bool(enter is not None and getattr(enter, "calls", True)) or bool(
        leave is not None and getattr(leave, "calls", True))


def _give_up_fast_launch(kernel: Kernel, error: Exception) -> None:
    """Every Kernel takes Triton's own launch from now on (the cached launch's call did not fit)."""
    import warnings

    global FAST_LAUNCH
    FAST_LAUNCH = False
    for other in list(_ALL_KERNELS):
        other._plain = True
    warnings.warn(f"blockfuse: the cached kernel launch failed on {kernel.name} ({error}); using Triton's own "
                  "launch", RuntimeWarning, stacklevel=3)


def _raw_stream(device: int) -> int:
    return torch._C._cuda_getCurrentRawStream(device)


# ----------------------------------------------------------------------------------------
# Launcher ops
# ----------------------------------------------------------------------------------------


class Launcher:
    """A launcher and the op it is registered as: ``launcher(*args)`` calls the op while
    ``torch.compile`` traces, and the launcher's Python directly otherwise."""

    __slots__ = ("body", "op", "name")

    def __init__(self, body, op, name: str):
        self.body = body
        self.op = op
        self.name = name

    def __call__(self, *args):
        if torch.compiler.is_compiling():
            return self.op(*args)
        first = args[0]
        if first.__class__ not in _PLAIN_TENSORS and isinstance(first, Tensor):
            # A tensor subclass (a DTensor): through the op, so that the subclass runs it on its local
            # tensors by the op's sharding rule (ops/sharding.py).
            from blockfuse.ops.sharding import register_sharding_rules

            register_sharding_rules()
            return self.op(*args)
        _direct.depth += 1
        try:
            return self.body(*args)
        finally:
            _direct.depth -= 1

    def __repr__(self) -> str:
        return f"Launcher(blockfuse::{self.name})"


def launcher_op(name: str, *, mutates_args=(), fake=None):
    """Registers the decorated launcher as the op ``blockfuse::<name>`` (``triton_op`` for compiled
    kernels, ``custom_op`` with the launcher as its fake under the interpreter) and returns a
    :class:`Launcher`. The launcher must return new tensors (an absent output as an empty tensor:
    see :func:`empty_if_none`) and declare every tensor it writes in place in ``mutates_args``.

    ``fake``: an opaque op everywhere (``custom_op``, this function its fake implementation), for a
    launcher that must run as it is under torch.compile: one whose kernels and GEMMs write row blocks
    of its own buffers, which traced would become Inductor's scatter copies (see ops/mlp.py)."""

    def register(body):
        qualified = f"blockfuse::{name}"
        if fake is not None:
            OPAQUE_LAUNCHERS.add(name)
        if fake is not None or interpreter_enabled():
            op = torch.library.custom_op(qualified, body, mutates_args=mutates_args)
            op.register_fake(fake or body)
        else:
            op = torch.library.triton_op(qualified, body, mutates_args=mutates_args)
        launcher = Launcher(body, getattr(torch.ops.blockfuse, name).default, name)
        LAUNCHERS[name] = launcher
        return launcher

    return register


# ----------------------------------------------------------------------------------------
# Helpers every launcher shares
# ----------------------------------------------------------------------------------------


MAX_GRID_YZ = 65535  # CUDA's limit on a grid's second and third dimensions (the first: 2**31 - 1)


def cdiv(a: int, b: int) -> int:
    """``ceil(a / b)`` for launch arithmetic. NOTE: plain Python, not ``triton.cdiv``: on Triton 3.9
    that is a constexpr function costing microseconds a call on the host path."""
    return -(-a // b)


def next_power_of_2(n: int) -> int:
    """The smallest power of two >= ``n`` (1 for n <= 1), in plain Python as :func:`cdiv`."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


class _Direct(threading.local):
    depth = 0  # launchers running as plain Python (Launcher.__call__'s direct path) on this thread


_direct = _Direct()
_EMPTIES: dict = {}


def empty_scalar(like: Tensor, dtype: torch.dtype = torch.float32) -> Tensor:
    """A new 0-d tensor on ``like``'s device (a tensorwise scale a kernel writes); while anything traces, allocated
    with one dimension and viewed as 0-d.

    NOTE: Inductor lowers an ``empty`` as a zero fill whose ranges it sets to zeros, one per dimension, to make it no
    kernel at all; a 0-d one has no dimension to zero and became a one-element fill kernel (torch 2.11-2.13,
    ``lowering.empty_strided``): 97 launches a compiled te-4layer FP8 step, its scales, in a step bound by its host
    (benchmarks/results/fp8/24-*/compiled-code). Eagerly a plain 0-d tensor: the view costs the host a microsecond."""
    if torch.compiler.is_compiling() or _tracing((like,)):
        return like.new_empty((1,), dtype=dtype).view(())
    return like.new_empty((), dtype=dtype)


_ZEROS: dict = {}


def zero_stand_in(like: Tensor, shape) -> Tensor:
    """A tensor of ``shape`` with ``like``'s dtype and device that reads as zeros and owns no memory of its own (one
    zero element, expanded): an FP8 op's stand-in for autograd (a proxy, or a gradient that its consumer ignores).

    NOTE: eagerly the zero element is one cached per device and dtype, shared by every stand-in (detached: none is a
    view another could be written through), where each made its own (an allocation and a one-element fill launch:
    four a fused FP8 block's training step). Nothing writes a stand-in. Traced, or for a tensor subclass, a new one;
    and none is cached while a CUDA graph is being captured (its fill would only be recorded, not run: the cached
    element would hold whatever the memory held)."""
    if like.__class__ not in _PLAIN_TENSORS or torch.compiler.is_compiling() or _dispatch_modes():
        return like.new_zeros(()).expand(shape)
    key = (like.device, like.dtype, torch.is_inference_mode_enabled())
    zero = _ZEROS.get(key)
    if zero is None:
        if like.is_cuda and torch.cuda.is_current_stream_capturing():
            return like.new_zeros(()).expand(shape)
        with torch.no_grad():
            zero = _ZEROS[key] = like.new_zeros(())
    return zero.expand(shape).detach()


def empty_if_none(t: Optional[Tensor], like: Tensor) -> Tensor:
    """An op cannot return None: an absent optional output travels as an empty tensor.

    NOTE: a launcher called directly (eagerly, not through its op) hands out one cached empty tensor per
    device and dtype instead of allocating one (about a microsecond each on the host; a norm's forward has three
    absent outputs). Through the op (torch.compile, DTensor) each one is new: an op's outputs may not alias
    each other or its inputs. The callers drop the empties; none is returned to the user or written."""
    if t is not None:
        return t
    if _direct.depth:
        key = (like.device, like.dtype)
        empty = _EMPTIES.get(key)
        if empty is None:
            empty = _EMPTIES[key] = like.new_empty((0,))
        return empty
    return like.new_empty((0,))


def none_if_empty(t: Tensor) -> Optional[Tensor]:
    """The inverse of :func:`empty_if_none`, on the autograd side of an op."""
    return None if t.numel() == 0 else t


def as_rows(t: Optional[Tensor], n: int) -> Optional[Tensor]:
    """``t`` as (M, n) with a contiguous last dimension, as a view where possible (None stays None).

    NOTE: a last dimension with a stride (a transposed or every-other-element view) is copied
    once: the kernels then read whole rows with vector loads, faster than gathering strided
    elements, and such inputs are rare for the outputs of a GEMM.
    """
    if t is None:
        return None
    t2 = t if t.dim() == 2 and t.shape[1] == n else t.reshape(-1, n)  # (M, n) as it is: a view costs host time
    return t2 if t2.stride(-1) == 1 else t2.contiguous()


def unviewed(t: Tensor, *shape: int) -> Tensor:
    """``t.view(*shape)`` as a tensor of its own: aten's ``_unsafe_view``, what ``F.linear`` of a 3-D input returns.
    An op's output made so is not a view, so an in-place op on it keeps the hooks autograd holds on it (FSDP2
    registers its pre-backward hook on a sharded module's outputs, and warns of a view); gradients flow as through
    ``view``."""
    return torch.ops.aten._unsafe_view(t, shape)


def vector(t: Optional[Tensor]) -> Optional[Tensor]:
    """A weight or bias with unit stride (kernels index it as ``W + cols``); None stays None."""
    return t if t is None or t.stride(0) == 1 else t.contiguous()


def row_units(n: int, *strides: int) -> int:
    """The largest power of two up to 16 that divides the row width ``n`` and every row stride: the unit a launcher
    passes them in to a kernel that multiplies them back by its constexpr ``VEC`` (see :func:`in_row_units`), so
    that the compiler knows they are multiples of it.

    NOTE: Triton specializes an integer argument on divisibility by 16 only. A width such as 9000 (8 x 1125)
    therefore told the compiler nothing: every row access went out as 2-byte loads and stores (sm_90 SASS: LDG.E.U16
    where 9008 gets LDG.E.128) and the norms' backward spilled 1328 bytes a thread; on an H200 their backward ran at
    0.02-0.12 of copy at [8192, 9000] (benchmarks/results/launch-rules/10-reload/).

    A symbolic stride (torch.compile tracing with dynamic shapes) promises nothing: 1."""
    return in_row_units(n, *strides)[0]


def in_row_units(n: int, *strides: int) -> tuple[int, int, tuple[int, ...]]:
    """``(units, n // units, strides // units)`` with ``units`` = :func:`row_units`: the ``VEC`` constexpr and the
    width and row strides as a launcher passes them. Cached on plain ints (the host path of every call)."""
    try:
        return _in_row_units(n, *strides)
    except TypeError:  # a SymInt: unhashable
        return 1, n, strides


@functools.lru_cache(maxsize=None)
def _in_row_units(n: int, *strides: int) -> tuple[int, int, tuple[int, ...]]:
    units = 16
    for v in (n, *strides):
        units = math.gcd(units, v)
    return units, n // units, tuple(v // units for v in strides)


def row_stride(t: Optional[Tensor]) -> int:
    """The row stride of a (M, N) tensor, 0 for None."""
    return 0 if t is None else t.stride(0)


@functools.lru_cache(maxsize=None)
def _multiprocessors(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def sm_count(device: torch.device) -> int:
    """Streaming multiprocessors of a CUDA ``device`` (the current device when it has no index)."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    return _multiprocessors(index)
