"""DLPack producers (objects with ``__dlpack__`` and ``__dlpack_device__``:
NumPy, PyTorch, CuPy, JAX, ...) and bare DLPack capsules as the
(address, count, type name) triples the native module takes. The capsule is
read, not consumed: the producer's array stays the owner of the memory, and
the caller keeps it (or the capsule) alive for the call, and for GPU calls
until the stream has run it."""

from . import _plugboard
from .layout import require_c_contiguous

_CPU, _CUDA, _CUDA_HOST, _CUDA_MANAGED = 1, 2, 3, 13
_HOST_DEVICES = (_CPU, _CUDA_HOST)
_CUDA_DEVICES = (_CUDA, _CUDA_MANAGED)
_DEVICE_NAMES = {_CPU: "CPU", _CUDA: "CUDA", _CUDA_HOST: "CUDA pinned host", 4: "OpenCL", 7: "Vulkan", 8: "Metal",
                 10: "ROCm", 11: "ROCm host", 13: "CUDA managed", 14: "oneAPI"}

# (DLDataTypeCode, bits) -> Plugboard type name. Other types (bool, int16,
# complex, ...) still move as raw bytes.
_DLPACK_TYPES = {
    (0, 8): "int8", (0, 32): "int32", (0, 64): "int64",
    (1, 8): "uint8", (1, 32): "uint32", (1, 64): "uint64",
    (2, 16): "float16", (2, 32): "float32", (2, 64): "float64",
    (4, 16): "bfloat16", (10, 8): "float8e4m3", (12, 8): "float8e5m2",
}


def is_dlpack(obj):
    """True for a DLPack producer or a DLPack capsule."""
    return hasattr(obj, "__dlpack__") or type(obj).__name__ == "PyCapsule"


def _device_name(kind):
    return _DEVICE_NAMES.get(kind, f"DLPack device type {kind}")


def _capsule(obj, stream):
    """The capsule of a producer (asked for DLPack 1.x first, so read-only
    arrays can say so), or obj itself when it is one."""
    if type(obj).__name__ == "PyCapsule":
        return obj
    try:
        return obj.__dlpack__(stream=stream, max_version=(1, 0))
    except TypeError:  # a producer of DLPack 0.x, whose __dlpack__ has no max_version
        return obj.__dlpack__(stream=stream)


def dlpack_buffer(obj, what, writable=False, reducing=False, cuda=False, stream=None):
    """The triple of a DLPack producer or capsule whose memory is host
    memory (cuda=False) or CUDA device memory (cuda=True). stream: the
    cudaStream_t (an int) the call will run on: a CUDA producer makes its
    data ready on it (0, the legacy default stream, is DLPack's 1)."""
    wanted = _CUDA_DEVICES if cuda else _HOST_DEVICES
    if hasattr(obj, "__dlpack_device__"):
        kind = int(obj.__dlpack_device__()[0])
        if kind not in wanted:
            raise ValueError(f"{what} is {_device_name(kind)} memory; the {'GPU' if cuda else 'host'} collectives "
                             f"take {'CUDA' if cuda else 'host'} memory")
    dl_stream = None if not cuda else (1 if not stream else int(stream))
    view = _plugboard.dlpack_view(_capsule(obj, dl_stream), what)
    if view["device_type"] not in wanted:
        raise ValueError(f"{what} is {_device_name(view['device_type'])} memory; the {'GPU' if cuda else 'host'} "
                         f"collectives take {'CUDA' if cuda else 'host'} memory")
    if view["lanes"] != 1 or view["bits"] % 8:
        raise TypeError(f"{what} has {view['lanes']} lanes of {view['bits']} bits per element; the collectives "
                        "take whole-byte scalar elements")
    if writable and view["read_only"]:
        raise ValueError(f"{what} is read-only but is written")
    itemsize = view["bits"] // 8
    count = require_c_contiguous(view["shape"], view["strides"], 1, what)
    kind = _DLPACK_TYPES.get((view["code"], view["bits"]))
    if kind is None:
        if reducing:
            raise TypeError(f"{what} has DLPack type code {view['code']} of {view['bits']} bits, which Plugboard "
                            "cannot reduce")
        return (view["address"], count * itemsize, "uint8")
    return (view["address"], count, kind)
