"""PyTorch's own ProcessGroupNCCL over Plugboard's NCCL API library.

Run with the library in NCCL's place (its SONAME is libnccl.so.2):
    LD_PRELOAD=<build>/lib/plugboard-nccl/libnccl.so.2 python3 tests/nccl/torch_nccl_shim.py [NRANKS]
tests/gpu/run.sh runs it (step torch-nccl-shim). Two ranks by default, one
GPU each where there are enough (else sharing one: run under CUDA MPS).
Checks all_reduce, all_gather_into_tensor, reduce_scatter_tensor,
broadcast, all_to_all_single, send/recv, and one DistributedDataParallel
step whose weights must match a single-process reference. Exit 0 when
every rank passed; prints which NCCL torch saw.
"""
import ctypes
import os
import socket
import sys
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_collectives(rank, n, dev):
    x = torch.arange(1000, dtype=torch.float32, device=dev) + rank
    dist.all_reduce(x)
    want = sum(torch.arange(1000, dtype=torch.float32) + r for r in range(n))
    assert torch.equal(x.cpu(), want), "all_reduce"
    out = torch.empty(n * 10, device=dev)
    dist.all_gather_into_tensor(out, torch.full((10,), float(rank), device=dev))
    assert torch.equal(out.cpu(), torch.arange(n).repeat_interleave(10).float()), "all_gather"
    rs = torch.empty(10, device=dev)
    dist.reduce_scatter_tensor(rs, torch.arange(n * 10, dtype=torch.float32, device=dev))
    assert torch.equal(rs.cpu(), n * torch.arange(rank * 10, rank * 10 + 10).float()), "reduce_scatter"
    b = torch.full((33,), float(rank), device=dev)
    dist.broadcast(b, src=n - 1)
    assert torch.equal(b.cpu(), torch.full((33,), float(n - 1))), "broadcast"
    a2a_in = torch.arange(n * 4, dtype=torch.float32, device=dev) + 100 * rank
    a2a_out = torch.empty_like(a2a_in)
    dist.all_to_all_single(a2a_out, a2a_in)
    want = torch.cat([torch.arange(rank * 4, rank * 4 + 4).float() + 100 * q for q in range(n)])
    assert torch.equal(a2a_out.cpu(), want), "all_to_all_single"
    if n >= 2 and rank < 2:
        t = torch.full((77,), 5.0 + rank, device=dev)
        if rank == 0:
            dist.send(t, dst=1)
        else:
            dist.recv(t, src=0)
            assert torch.equal(t.cpu(), torch.full((77,), 5.0)), "send/recv"


def check_ddp(rank, n, dev):
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 4).to(dev)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[dev.index])
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(1)
    data, target = torch.randn(n * 8, 16, generator=gen), torch.randn(n * 8, 4, generator=gen)
    mine = slice(rank * 8, rank * 8 + 8)
    torch.nn.functional.mse_loss(ddp(data[mine].to(dev)), target[mine].to(dev)).backward()
    opt.step()
    torch.manual_seed(0)
    ref = torch.nn.Linear(16, 4)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    torch.nn.functional.mse_loss(ref(data), target).backward()
    ref_opt.step()
    for p, r in zip(model.parameters(), ref.parameters()):
        assert torch.allclose(p.detach().cpu(), r.detach(), atol=1e-5), "DDP weights differ from the reference"


def worker(rank, n, port, results):
    try:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        dev = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(dev)
        dist.init_process_group("nccl", rank=rank, world_size=n, device_id=dev)
        check_collectives(rank, n, dev)
        check_ddp(rank, n, dev)
        torch.cuda.synchronize()
        dist.destroy_process_group()
        results.put((rank, "ok"))
    except Exception:
        results.put((rank, traceback.format_exc()))


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    # The libnccl.so.2 this process loaded (by SONAME: the preloaded one if any).
    lib = ctypes.CDLL("libnccl.so.2")
    code = ctypes.c_int(0)
    lib.ncclGetVersion(ctypes.byref(code))
    lib.ncclGetErrorString.restype = ctypes.c_char_p
    print("torch", torch.__version__, "built with NCCL", torch.cuda.nccl.version(), "| libnccl.so.2 loaded here:",
          code.value, "/", lib.ncclGetErrorString(3).decode(), "| LD_PRELOAD=" + os.environ.get("LD_PRELOAD", ""),
          flush=True)
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=worker, args=(r, n, port, results)) for r in range(n)]
    for p in procs:
        p.start()
    got = {}
    for _ in range(n):
        rank, what = results.get(timeout=240)
        got[rank] = what
    for p in procs:
        p.join(timeout=30)
    failed = False
    for rank in sorted(got):
        print(f"rank {rank}: {got[rank]}")
        failed = failed or got[rank] != "ok"
    sys.exit(1 if failed or len(got) != n else 0)


if __name__ == "__main__":
    main()
