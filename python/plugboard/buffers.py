"""Turns the objects users pass (NumPy arrays, buffer-protocol objects,
torch CPU tensors) into the (address, count, type name) triples the native
module takes, checking what the native side cannot: contiguity, host
memory, writability and a type the collectives know."""

import numpy as np

# NumPy dtype -> Plugboard type name. Types missing here can still move
# (broadcast, gathers, all_to_all, send/recv) as raw bytes.
_NUMPY_TYPES = {
    np.dtype(np.int8): "int8",
    np.dtype(np.uint8): "uint8",
    np.dtype(np.int32): "int32",
    np.dtype(np.uint32): "uint32",
    np.dtype(np.int64): "int64",
    np.dtype(np.uint64): "uint64",
    np.dtype(np.float16): "float16",
    np.dtype(np.float32): "float32",
    np.dtype(np.float64): "float64",
}

# torch dtype name (str(dtype) without "torch.") -> Plugboard type name.
_TORCH_TYPES = {
    "int8": "int8",
    "uint8": "uint8",
    "int32": "int32",
    "uint32": "uint32",
    "int64": "int64",
    "uint64": "uint64",
    "float16": "float16",
    "bfloat16": "bfloat16",
    "float32": "float32",
    "float64": "float64",
    "float8_e4m3fn": "float8e4m3",
    "float8_e5m2": "float8e5m2",
}


def _is_torch_tensor(obj):
    return type(obj).__module__.startswith("torch") and hasattr(obj, "data_ptr")


def _torch_buffer(t, what, writable, reducing):
    if t.device.type != "cpu":
        raise ValueError(f"{what} is on {t.device}; the host collectives take CPU tensors")
    if not t.is_contiguous():
        raise ValueError(f"{what} is not contiguous (call .contiguous() first)")
    name = str(t.dtype).replace("torch.", "")
    kind = _TORCH_TYPES.get(name)
    if kind is None:
        if reducing:
            raise TypeError(f"{what} has dtype {t.dtype}, which Plugboard cannot reduce")
        return (t.data_ptr(), t.numel() * t.element_size(), "uint8")
    return (t.data_ptr(), t.numel(), kind)


def _as_array(obj, what):
    if isinstance(obj, np.ndarray):
        return obj
    try:
        return np.asarray(memoryview(obj))
    except TypeError as e:
        raise TypeError(f"{what} ({type(obj).__name__}) is neither a NumPy array, a buffer nor a CPU tensor") from e


def _numpy_buffer(a, what, writable, reducing):
    if not a.flags.c_contiguous:
        raise ValueError(f"{what} is not C-contiguous (np.ascontiguousarray makes a copy that is)")
    if writable and not a.flags.writeable:
        raise ValueError(f"{what} is read-only but is written")
    kind = _NUMPY_TYPES.get(a.dtype) if a.dtype.isnative else None
    if kind is None:
        if reducing:
            raise TypeError(f"{what} has dtype {a.dtype}, which Plugboard cannot reduce")
        return (a.ctypes.data, a.nbytes, "uint8")
    return (a.ctypes.data, a.size, kind)


def as_buffer(obj, what="buffer", writable=False, reducing=False):
    """The (address, count, type name) triple for obj. what names obj in
    errors; writable: obj is written; reducing: its type must be one the
    collectives reduce (else any type moves as bytes). The caller keeps obj
    alive for the call."""
    if obj is None:
        raise TypeError(f"{what} is None")
    if _is_torch_tensor(obj):
        return _torch_buffer(obj, what, writable, reducing)
    return _numpy_buffer(_as_array(obj, what), what, writable, reducing)
