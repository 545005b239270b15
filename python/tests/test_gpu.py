"""GpuCollectives from Python on CUDA tensors, __cuda_array_interface__
objects, DLPack producers and capsules, and raw pointers: every collective checked against torch on the
host, 2 ranks sharing GPU 0 (run under CUDA MPS, tests/gpu/run.sh step
python-gpu-mps), and bad input refused by name. Skipped without a GPU."""

import pytest

import plugboard
from ranks import run_ranks

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.skipif(not (plugboard._plugboard.has_cuda and torch.cuda.is_available()),
                                reason="needs a CUDA GPU and a plugboard built with CUDA")

SETTINGS = {"transports": "cudaipc,ethernet", "timeout": "30"}


class Interface:
    """Only __cuda_array_interface__, as CuPy or Numba arrays show it."""

    def __init__(self, tensor):
        self.tensor = tensor
        self.__cuda_array_interface__ = tensor.__cuda_array_interface__


class DlpackOnly:
    """Only __dlpack__ / __dlpack_device__, as JAX arrays show themselves;
    records the stream each export was asked to make the data ready on."""

    def __init__(self, tensor):
        self.tensor, self.streams = tensor, []

    def __dlpack__(self, stream=None, max_version=None):
        self.streams.append(stream)
        return self.tensor.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self.tensor.__dlpack_device__()


def values(rank, count, dtype):
    return ((torch.arange(count) * 7 + rank * 13) % 23 + 1).to(dtype)


def every_collective(rank, n, address):
    torch.cuda.set_device(0)
    comm = plugboard.Communicator(rank, n, plugboard.unique_id_from_address(address), timeout=60, settings=SETTINGS)
    gpu = plugboard.GpuCollectives(comm)
    s = torch.cuda.Stream()
    dev = torch.device("cuda", 0)
    count = 10007
    for dtype in (torch.float32, torch.bfloat16, torch.int32):
        everyone = [values(r, count, dtype) for r in range(n)]
        x = everyone[rank].to(dev)
        out = torch.empty_like(x)
        gpu.all_reduce(x, out, op="sum", stream=s)
        gpu.synchronize(s)
        assert torch.equal(out.cpu(), sum(everyone[1:], everyone[0])), f"all_reduce {dtype}"
        gpu.all_reduce(x, op="max", stream=s)  # in place
        gpu.synchronize(s)
        assert torch.equal(x.cpu(), torch.stack(everyone).max(0).values), f"all_reduce max in place {dtype}"
    mine = values(rank, count, torch.float32).to(dev)
    gathered = torch.empty(count * n, device=dev)
    gpu.all_gather(Interface(mine), Interface(gathered), stream=s)  # __cuda_array_interface__ only
    rs = torch.empty(count, device=dev)
    big = torch.cat([values(rank, count, torch.float32)] * n).to(dev)
    gpu.reduce_scatter(big, rs, stream=s)
    b = (values(rank, 333, torch.float32) + 100 * rank).to(dev)
    gpu.broadcast(b, root=n - 1, stream=s)
    red = torch.empty(count, device=dev)
    gpu.reduce((mine.data_ptr(), count, "float32"), (red.data_ptr(), count, "float32"), root=0, stream=s)  # raw
    a2a_in = torch.arange(n * 64, dtype=torch.float32, device=dev) + 1000 * rank
    a2a_out = torch.empty_like(a2a_in)
    gpu.all_to_all(a2a_in, a2a_out, stream=s)
    gpu.synchronize(s)
    host = [values(r, count, torch.float32) for r in range(n)]
    assert torch.equal(gathered.cpu(), torch.cat(host)), "all_gather through __cuda_array_interface__"
    assert torch.equal(rs.cpu(), sum(host[1:], host[0])), "reduce_scatter"
    assert torch.equal(b.cpu(), values(n - 1, 333, torch.float32) + 100 * (n - 1)), "broadcast"
    if rank == 0:
        assert torch.equal(red.cpu(), sum(host[1:], host[0])), "reduce from raw pointers"
    want = torch.cat([torch.arange(rank * 64, rank * 64 + 64, dtype=torch.float32) + 1000 * q for q in range(n)])
    assert torch.equal(a2a_out.cpu(), want), "all_to_all"
    # DLPack: a producer, then a bare capsule (in place), on the caller's stream.
    dl_in, dl_out = DlpackOnly(values(rank, count, torch.float32).to(dev)), DlpackOnly(torch.empty(count, device=dev))
    gpu.all_reduce(dl_in, dl_out, op="max", stream=s)
    cap = torch.full((4099,), float(rank + 1), device=dev)
    gpu.all_reduce(torch.utils.dlpack.to_dlpack(cap), op="sum", stream=s)
    gpu.synchronize(s)
    assert torch.equal(dl_out.tensor.cpu(), torch.stack(host).max(0).values), "all_reduce through __dlpack__"
    assert dl_in.streams == [s.cuda_stream] and dl_out.streams == [s.cuda_stream], dl_in.streams
    assert torch.all(cap == n * (n + 1) / 2), "all_reduce on a DLPack capsule"
    if rank < 2:
        t = torch.full((77,), 5.0 + rank, device=dev)
        if rank == 0:
            gpu.send(t, 1, stream=s)
        else:
            gpu.recv(t, 0, stream=s)
        gpu.synchronize(s)
        assert torch.equal(t.cpu(), torch.full((77,), 5.0)), "send/recv"
    # Refusals, before anything is enqueued.
    with pytest.raises(ValueError, match="CUDA tensors"):
        gpu.all_reduce(torch.ones(4))
    with pytest.raises(ValueError, match="not contiguous"):
        gpu.all_reduce(torch.ones(8, 8, device=dev).t())
    with pytest.raises(TypeError, match="cannot reduce"):
        gpu.all_reduce(torch.ones(4, dtype=torch.bool, device=dev))
    with pytest.raises(plugboard.Error, match="expected"):
        gpu.all_gather(mine, torch.empty(3, device=dev))
    with pytest.raises(TypeError, match="neither a CUDA tensor"):
        gpu.all_reduce([1, 2, 3])
    with pytest.raises(ValueError, match="CPU memory; the GPU collectives take CUDA memory"):
        gpu.all_reduce(DlpackOnly(torch.ones(4)))
    del gpu
    comm.close()
    return True


def test_every_gpu_collective_on_two_ranks_sharing_gpu_0():
    assert run_ranks(2, every_collective, timeout=120) == [True, True]
