"""A cheaper ``kernel[grid](...)`` for kernels launched many times with few specializations.

``JITFunction.run`` binds every argument, hashes a specialization key and checks globals on
each call: tens of microseconds of host time, which is longer than a norm kernel on a
small tensor. :class:`CachedKernel` keys the compiled kernel on a conservative
specialization of its own (every property Triton specializes on: dtypes, 16-byte
alignment of pointers, ints equal to 1 or divisible by 16, 32/64-bit ints, and the
constexpr values) and calls the compiled kernel directly on a hit. A miss goes through
Triton's normal path, which compiles and returns the kernel to cache.
"""

from __future__ import annotations

import functools
from typing import Optional

import torch

from blockfuse.runtime import interpreter_enabled


def _spec(arg):
    if isinstance(arg, torch.Tensor):
        return (arg.dtype, arg.data_ptr() % 16 == 0)
    if arg is None or isinstance(arg, (bool, float)):
        return arg if arg is None or isinstance(arg, bool) else float
    if isinstance(arg, int):
        return (arg == 1, arg % 16 == 0, -(2**31) <= arg < 2**31)
    return arg


class CachedKernel:
    """Launches a ``@triton.jit`` kernel, reusing its compiled form when the key matches."""

    def __init__(self, kernel):
        self.kernel = kernel
        self._cache = {}
        params = getattr(kernel, "params", None)
        if params is None:  # the interpreter's kernels: always the normal path
            return
        self._constexpr_names = [p.name for p in params if p.is_constexpr]
        first = len(params) - len(self._constexpr_names)
        if any(not p.is_constexpr for p in params[first:]):
            raise TypeError(f"{kernel.__name__}: CachedKernel needs the constexpr parameters last")

    def __call__(self, grid, *args, num_warps=4, num_stages=None, maxnreg=None, **constexprs):
        """``maxnreg``: a register cap per thread for ptxas (None: its own choice); ignored by
        the interpreter."""
        grid = tuple(grid) + (1,) * (3 - len(grid))
        # The compiled kernel is loaded on one device: the first tensor's device is in the key.
        device = next((a.device for a in args if isinstance(a, torch.Tensor)), None)
        key = (device, tuple(map(_spec, args)), tuple(constexprs.items()), num_warps, num_stages, maxnreg)
        compiled = self._cache.get(key)
        if compiled is not None:
            # The compiled runner takes every parameter in declaration order, constexprs
            # included (it skips them); the tensors' device is the current one.
            compiled[grid](*args, *(constexprs[name] for name in self._constexpr_names))
            return
        options = {"num_warps": num_warps}
        if num_stages is not None:
            options["num_stages"] = num_stages
        if maxnreg is not None and not interpreter_enabled():
            options["maxnreg"] = maxnreg
        compiled = self.kernel[grid](*args, **constexprs, **options)
        if compiled is not None and hasattr(compiled, "__getitem__") and not interpreter_enabled():
            self._cache[key] = compiled

    def compiled(self) -> list:
        """The compiled kernels launched so far (their ``n_regs`` and ``n_spills`` are what a
        tile sweep reports)."""
        return list(self._cache.values())


def empty_if_none(t: Optional[torch.Tensor], like: torch.Tensor) -> torch.Tensor:
    """A custom op cannot return None: an absent optional output travels as an empty tensor."""
    return like.new_empty((0,)) if t is None else t


def none_if_empty(t: torch.Tensor) -> Optional[torch.Tensor]:
    """The inverse of :func:`empty_if_none`, on the autograd side of a custom op."""
    return None if t.numel() == 0 else t


def as_rows(t: Optional[torch.Tensor], n: int) -> Optional[torch.Tensor]:
    """``t`` as (M, n) with a contiguous last dimension, as a view where possible (None stays None).

    NOTE: a last dimension with a stride (a transposed or every-other-element view) is copied
    once: the kernels then read whole rows with vector loads, faster than gathering strided
    elements, and such inputs are rare for the outputs of a GEMM.
    """
    if t is None:
        return None
    t2 = t.reshape(-1, n)
    return t2 if t2.stride(-1) == 1 else t2.contiguous()


@functools.lru_cache(maxsize=None)
def _multiprocessors(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def sm_count(device: torch.device) -> int:
    """Streaming multiprocessors of a CUDA ``device`` (the current device when it has no index)."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    return _multiprocessors(index)
