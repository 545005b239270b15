"""Host collectives on DLPack producers and capsules (the exchange JAX,
CuPy and others offer instead of the buffer protocol), and the clear errors
for what they may hand over: read-only, strided, consumed, foreign or
device memory."""

import ctypes

import numpy as np
import pytest

import plugboard
from plugboard.dlpack import dlpack_buffer
from ranks import TEST_SETTINGS, run_ranks


class OnlyDlpack:
    """An array that offers only __dlpack__ / __dlpack_device__ (no buffer
    protocol), as JAX arrays do; legacy: a DLPack 0.x producer, whose
    __dlpack__ takes no max_version."""

    def __init__(self, array, legacy=False, device=None):
        self.array, self.legacy, self.device = array, legacy, device

    def __dlpack__(self, stream=None, max_version=None):
        if self.legacy and max_version is not None:
            raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")
        return self.array.__dlpack__(stream=stream, max_version=max_version)

    def __dlpack_device__(self):
        return self.device or self.array.__dlpack_device__()


def collectives_on_dlpack(rank, n, address):
    comm = plugboard.Communicator(rank, n, plugboard.unique_id_from_address(address), timeout=30,
                                  settings=TEST_SETTINGS)
    for legacy in (False, True):
        x = np.arange(1001, dtype=np.float32) + rank
        out = np.empty_like(x)
        comm.all_reduce(OnlyDlpack(x, legacy), OnlyDlpack(out, legacy))
        assert np.array_equal(out, sum(np.arange(1001, dtype=np.float32) + r for r in range(n))), legacy
    gathered = np.zeros(2 * 7 * n, dtype=np.int64).reshape(n * 2, 7)  # 2-D, compact
    mine = np.full((2, 7), rank, dtype=np.int64)
    comm.all_gather(OnlyDlpack(mine), OnlyDlpack(gathered))
    assert np.array_equal(gathered[:, 0], np.repeat(np.arange(n), 2))
    flags = np.array([rank == 0, True, False]) if rank == 0 else np.zeros(3, dtype=bool)
    comm.broadcast(OnlyDlpack(flags), root=0)  # bool: moved as bytes
    assert flags.tolist() == [True, True, False]
    torch = pytest.importorskip("torch")
    t = torch.full((33,), float(rank + 1))
    comm.all_reduce(torch.utils.dlpack.to_dlpack(t), op="max")  # a bare capsule, read in place
    assert torch.all(t == n)
    comm.close()
    return True


def test_collectives_take_dlpack_producers_and_capsules():
    assert all(run_ranks(2, collectives_on_dlpack))


def _capsule_named(name):
    new = ctypes.pythonapi.PyCapsule_New
    new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    _capsule_named.keep = name.encode()
    return new(ctypes.addressof(ctypes.c_int(0)), _capsule_named.keep, None)


def test_bad_dlpack_input_is_a_clear_error():
    readonly = np.ones(8, dtype=np.float32)
    readonly.setflags(write=False)
    with pytest.raises(ValueError, match="read-only but is written"):
        dlpack_buffer(OnlyDlpack(readonly), "recv", writable=True)
    assert dlpack_buffer(OnlyDlpack(readonly), "send")[1:] == (8, "float32")
    with pytest.raises(ValueError, match=r"not C-contiguous \(shape \(4,\), strides \(2,\)\)"):
        dlpack_buffer(OnlyDlpack(np.ones(8, dtype=np.float32)[::2]), "send")
    with pytest.raises(ValueError, match="CUDA memory; the host collectives take host memory"):
        dlpack_buffer(OnlyDlpack(np.ones(8), device=(2, 0)), "send")
    with pytest.raises(TypeError, match="cannot reduce"):
        dlpack_buffer(OnlyDlpack(np.ones(4, dtype=np.complex64)), "send", reducing=True)
    assert dlpack_buffer(OnlyDlpack(np.ones(4, dtype=np.complex64)), "buf")[1:] == (32, "uint8")
    assert dlpack_buffer(OnlyDlpack(np.ones((3, 1, 5), dtype=np.int8)), "buf")[1:] == (15, "int8")
    with pytest.raises(ValueError, match="capsule named 'not_a_tensor'"):
        dlpack_buffer(_capsule_named("not_a_tensor"), "send")
    torch = pytest.importorskip("torch")
    capsule = torch.utils.dlpack.to_dlpack(torch.ones(4))
    torch.utils.dlpack.from_dlpack(capsule)  # consumes it
    with pytest.raises(ValueError, match="already consumed"):
        dlpack_buffer(capsule, "send")
    half = torch.ones(6, dtype=torch.bfloat16)
    assert dlpack_buffer(torch.utils.dlpack.to_dlpack(half), "x")[1:] == (6, "bfloat16")
