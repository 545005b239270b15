"""GPU collectives from Python: CUDA tensors (PyTorch), any object with
``__cuda_array_interface__`` (CuPy, Numba, PyTorch), DLPack producers and
capsules on a CUDA device (JAX, CuPy, ...), or (pointer, count, type name)
tuples of raw CUDA pointers.

    import torch, plugboard
    comm = plugboard.Communicator.from_env()
    torch.cuda.set_device(local_rank)
    gpu = plugboard.GpuCollectives(comm)             # collective: every rank
    x = torch.ones(1 << 20, device="cuda")
    gpu.all_reduce(x, stream=torch.cuda.current_stream())
    gpu.synchronize(torch.cuda.current_stream())

Calls enqueue work on the stream and return (as NCCL's do); synchronize()
waits, bounded, and raises plugboard.Error naming a failed peer.
"""

from . import _plugboard
from .buffers import _is_torch_tensor, _torch_buffer
from .communicator import _op_name
from .dlpack import dlpack_buffer, is_dlpack
from .layout import require_c_contiguous

# __cuda_array_interface__ typestr (byte order removed) -> Plugboard type name.
_CAI_TYPES = {"i1": "int8", "u1": "uint8", "i4": "int32", "u4": "uint32", "i8": "int64", "u8": "uint64",
              "f2": "float16", "f4": "float32", "f8": "float64"}


def _interface_buffer(cai, what, reducing):
    typestr = cai["typestr"]
    if typestr[0] == ">":
        raise ValueError(f"{what} is big-endian ({typestr}); the collectives take little-endian data")
    itemsize = int(typestr[2:])
    count = require_c_contiguous(cai["shape"], cai.get("strides"), itemsize, what)
    address, readonly = cai["data"]
    kind = _CAI_TYPES.get(typestr[1:])
    if kind is None:
        if reducing:
            raise TypeError(f"{what} has element type {typestr!r}, which Plugboard cannot reduce")
        return (int(address), count * itemsize, "uint8")
    return (int(address), count, kind)


def as_cuda_buffer(obj, what="buffer", reducing=False, stream=0):
    """The (CUDA address, count, type name) triple for obj: a CUDA tensor,
    an object with __cuda_array_interface__, a DLPack producer or capsule
    on a CUDA device, or a (pointer, count, type name) tuple (taken as
    given). what names obj in errors; reducing: its type must be one the
    collectives reduce; stream: the cudaStream_t the call runs on (a
    DLPack producer makes its data ready there). The caller keeps obj alive
    until the stream has run the call."""
    if obj is None:
        raise TypeError(f"{what} is None")
    if isinstance(obj, tuple):
        if len(obj) != 3:
            raise TypeError(f"{what}: a raw buffer is (pointer, count, type name), got {len(obj)} items")
        return (int(obj[0]), int(obj[1]), str(obj[2]))
    if _is_torch_tensor(obj):
        return _torch_buffer(obj, what, reducing, cuda=True)
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        return _interface_buffer(cai, what, reducing)
    if is_dlpack(obj):
        return dlpack_buffer(obj, what, reducing=reducing, cuda=True, stream=stream)
    raise TypeError(f"{what} ({type(obj).__name__}) is neither a CUDA tensor, an object with "
                    "__cuda_array_interface__ or __dlpack__, a DLPack capsule, nor a (pointer, count, type name) "
                    "tuple")


def _stream_handle(stream):
    """A cudaStream_t as an int: None or 0 is the legacy default stream; a
    torch.cuda.Stream (.cuda_stream), a CuPy stream (.ptr) or an int."""
    if stream is None:
        return 0
    for attr in ("cuda_stream", "ptr"):
        if hasattr(stream, attr):
            return int(getattr(stream, attr))
    return int(stream)


class GpuCollectives:
    """Collectives on CUDA buffers over comm's ranks, on the CUDA device
    current when it is made. Construction is collective (every rank makes
    one; it connects the GPU pairs: cudaipc on one host, else staged over
    the network transports)."""

    def __init__(self, comm):
        if not _plugboard.has_cuda:
            raise _plugboard.Error("this plugboard was built without CUDA: GPU collectives are not available")
        self._comm = comm  # the communicator must outlive the collectives
        self._native = _plugboard._GpuCollectives(comm._comm())

    def all_reduce(self, send, recv=None, op="sum", stream=None):
        """recv = op over ranks of send (recv=None: in place). Returns recv."""
        recv = send if recv is None else recv
        h = _stream_handle(stream)
        self._native.all_reduce(as_cuda_buffer(send, "send", True, h), as_cuda_buffer(recv, "recv", True, h),
                                _op_name(op), h)
        return recv

    def all_gather(self, send, recv, stream=None):
        """recv = every rank's send, concatenated by rank. Returns recv."""
        h = _stream_handle(stream)
        self._native.all_gather(as_cuda_buffer(send, "send", stream=h), as_cuda_buffer(recv, "recv", stream=h), h)
        return recv

    def reduce_scatter(self, send, recv, op="sum", stream=None):
        """recv = block `rank` of op over ranks of send. Returns recv."""
        h = _stream_handle(stream)
        self._native.reduce_scatter(as_cuda_buffer(send, "send", True, h), as_cuda_buffer(recv, "recv", True, h),
                                    _op_name(op), h)
        return recv

    def broadcast(self, buf, root=0, stream=None):
        """buf on every rank = buf on root. Returns buf."""
        h = _stream_handle(stream)
        b = as_cuda_buffer(buf, "buf", stream=h)
        self._native.broadcast(b, b, int(root), h)
        return buf

    def reduce(self, send, recv=None, op="sum", root=0, stream=None):
        """recv on root = op over ranks of send (recv=None: in place)."""
        recv = send if recv is None else recv
        h = _stream_handle(stream)
        self._native.reduce(as_cuda_buffer(send, "send", True, h), as_cuda_buffer(recv, "recv", True, h),
                            _op_name(op), int(root), h)
        return recv

    def all_to_all(self, send, recv, stream=None):
        """Block j of send goes to rank j; block i of recv comes from rank i."""
        h = _stream_handle(stream)
        self._native.all_to_all(as_cuda_buffer(send, "send", stream=h), as_cuda_buffer(recv, "recv", stream=h), h)
        return recv

    def send(self, buf, peer, stream=None):
        """Sends buf to peer (which calls recv)."""
        h = _stream_handle(stream)
        self._native.send(as_cuda_buffer(buf, "buf", stream=h), int(peer), h)

    def recv(self, buf, peer, stream=None):
        """Receives into buf what peer sends. Returns buf."""
        h = _stream_handle(stream)
        self._native.recv(as_cuda_buffer(buf, "buf", stream=h), int(peer), h)
        return buf

    def synchronize(self, stream=None):
        """Waits for the stream (bounded) and raises the first device failure."""
        self._native.synchronize(_stream_handle(stream))

    def check_errors(self):
        """Raises the first device failure recorded, without waiting."""
        self._native.check_errors()
