"""Turns the objects users pass (NumPy arrays, buffer-protocol objects,
torch CPU tensors, DLPack producers and capsules in host memory) into the (address, count, type name) triples the native
module takes, checking what the collectives cannot see: contiguity, host
memory, writability and a type they can reduce."""

from ._plugboard import host_buffer
from .dlpack import dlpack_buffer, is_dlpack

# Buffer-protocol format (byte-order prefix removed) and item size ->
# Plugboard type name. Types missing here still move (broadcast, gathers,
# all_to_all, send/recv) as raw bytes.
_FORMAT_TYPES = {
    ("b", 1): "int8", ("B", 1): "uint8", ("?", 1): None,
    ("i", 4): "int32", ("I", 4): "uint32", ("l", 4): "int32", ("L", 4): "uint32",
    ("l", 8): "int64", ("L", 8): "uint64", ("q", 8): "int64", ("Q", 8): "uint64",
    ("e", 2): "float16", ("f", 4): "float32", ("d", 8): "float64",
}
_NATIVE_ORDER = ("@", "=", "<")  # the collectives run on little-endian hosts

_torch_types = None


def _torch_type_table(torch):
    """torch dtype -> Plugboard type name, built on first use."""
    global _torch_types
    if _torch_types is None:
        names = {"int8": "int8", "uint8": "uint8", "int32": "int32", "uint32": "uint32", "int64": "int64",
                 "uint64": "uint64", "float16": "float16", "bfloat16": "bfloat16", "float32": "float32",
                 "float64": "float64", "float8_e4m3fn": "float8e4m3", "float8_e5m2": "float8e5m2"}
        _torch_types = {getattr(torch, k): v for k, v in names.items() if hasattr(torch, k)}
    return _torch_types


def _is_torch_tensor(obj):
    return type(obj).__module__.startswith("torch") and hasattr(obj, "data_ptr")


def _torch_buffer(t, what, reducing, cuda=False):
    """The triple of a contiguous tensor on the CPU (cuda: on a CUDA device)."""
    import torch
    if cuda and not t.is_cuda:
        raise ValueError(f"{what} is on {t.device}; the GPU collectives take CUDA tensors")
    if not cuda and not t.is_cpu:
        raise ValueError(f"{what} is on {t.device}; the host collectives take CPU tensors")
    if not t.is_contiguous():
        raise ValueError(f"{what} is not contiguous (call .contiguous() first)")
    kind = _torch_type_table(torch).get(t.dtype)
    if kind is None:
        if reducing:
            raise TypeError(f"{what} has dtype {t.dtype}, which Plugboard cannot reduce")
        return (t.data_ptr(), t.numel() * t.element_size(), "uint8")
    return (t.data_ptr(), t.numel(), kind)


def _protocol_buffer(obj, what, writable, reducing):
    address, nbytes, fmt, itemsize = host_buffer(obj, what, writable)
    if fmt[:1] in _NATIVE_ORDER:
        fmt = fmt[1:]
    kind = _FORMAT_TYPES.get((fmt, itemsize))
    if kind is None:
        if reducing:
            raise TypeError(f"{what} has element format {fmt!r} ({itemsize} bytes), which Plugboard cannot reduce")
        return (address, nbytes, "uint8")
    return (address, nbytes // itemsize, kind)


def as_buffer(obj, what="buffer", writable=False, reducing=False):
    """The (address, count, type name) triple for obj. what names obj in
    errors; writable: obj is written; reducing: its type must be one the
    collectives reduce (else any type moves as bytes). The caller keeps obj
    alive for the call."""
    if obj is None:
        raise TypeError(f"{what} is None")
    if _is_torch_tensor(obj):
        return _torch_buffer(obj, what, reducing)
    if is_dlpack(obj) and not _has_buffer_protocol(obj):
        return dlpack_buffer(obj, what, writable, reducing)
    return _protocol_buffer(obj, what, writable, reducing)


def _has_buffer_protocol(obj):
    try:
        memoryview(obj).release()
        return True
    except TypeError:
        return False
