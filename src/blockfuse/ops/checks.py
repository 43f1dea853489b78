"""Argument checks shared by the public functionals: errors that name the argument and say what was expected."""

from __future__ import annotations

from torch import Tensor


def check_like(name: str, tensor, like: Tensor, like_name: str, *, shape: bool = True) -> None:
    """``tensor`` (the argument ``name``) must be a Tensor with the dtype, device and (if ``shape``)
    the shape of ``like`` (the argument ``like_name``)."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{name}: expected a Tensor, got {type(tensor).__name__}")
    if tensor.dtype != like.dtype:
        raise TypeError(f"{name}: expected dtype {like.dtype} like {like_name}, got {tensor.dtype}")
    if shape and tensor.shape != like.shape:
        raise ValueError(f"{name}: expected shape {tuple(like.shape)} like {like_name}, got {tuple(tensor.shape)}")
    if tensor.device != like.device:
        raise ValueError(f"{name}: expected a tensor on {like.device} like {like_name}, got {tensor.device}")
