"""The "plugboard" torch.distributed backend on CPU tensors: every
collective under a torchrun-style environment, a DistributedDataParallel
step against a one-process reference, and torchrun itself."""

import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (tools/python-env.sh installs it)")
import torch.distributed as dist  # noqa: E402

from ranks import free_port, run_ranks  # noqa: E402


def init(rank, n, address):
    """init_process_group("plugboard") the way torchrun's environment drives it."""
    host, port = address.split(":")
    os.environ.update({"MASTER_ADDR": host, "MASTER_PORT": port, "RANK": str(rank), "WORLD_SIZE": str(n),
                       "PLUGBOARD_TRANSPORTS": "ethernet"})
    import plugboard.torch_backend  # noqa: F401  registers the backend
    dist.init_process_group("plugboard", timeout=__import__("datetime").timedelta(seconds=30))
    assert dist.get_backend() == "plugboard" and dist.get_rank() == rank and dist.get_world_size() == n


def values(rank, shape, dtype=torch.float32, salt=0):
    n = 1
    for s in shape:
        n *= s
    return ((torch.arange(n) * 7 + rank * 13 + salt) % 23 + 1).to(dtype).reshape(shape)


def collectives(rank, n, address):
    init(rank, n, address)
    shape = (5, 7)
    everyone = [values(r, shape) for r in range(n)]
    total = sum(everyone)

    for op, expect in [(dist.ReduceOp.SUM, total), (dist.ReduceOp.MAX, torch.stack(everyone).amax(0)),
                       (dist.ReduceOp.MIN, torch.stack(everyone).amin(0)),
                       (dist.ReduceOp.PRODUCT, torch.stack(everyone).prod(0)), (dist.ReduceOp.AVG, total / n)]:
        t = everyone[rank].clone()
        dist.all_reduce(t, op=op)
        assert torch.allclose(t, expect), f"all_reduce {op}"
    bf = everyone[rank].to(torch.bfloat16)
    dist.all_reduce(bf)
    assert torch.allclose(bf.float(), total, rtol=1e-2), "all_reduce bfloat16"
    strided = everyone[rank].clone().t()  # not contiguous
    dist.all_reduce(strided)
    assert torch.equal(strided, total.t()), "all_reduce on a transposed tensor"
    work = dist.all_reduce(everyone[rank].clone(), async_op=True)
    assert work.wait() and work.is_completed()

    outs = [torch.empty(shape) for _ in range(n)]
    dist.all_gather(outs, everyone[rank])
    assert all(torch.equal(outs[r], everyone[r]) for r in range(n)), "all_gather"
    flat = torch.empty((n,) + shape)
    dist.all_gather_into_tensor(flat, everyone[rank])
    assert torch.equal(flat, torch.stack(everyone)), "all_gather_into_tensor"

    b = everyone[rank].clone()
    dist.broadcast(b, src=n - 1)
    assert torch.equal(b, everyone[n - 1]), "broadcast"
    r = everyone[rank].clone()
    dist.reduce(r, dst=0)
    if rank == 0:
        assert torch.equal(r, total), "reduce"

    big = [values(q, (n * 3, 4), salt=3) for q in range(n)]
    out = torch.empty(3, 4)
    dist.reduce_scatter(out, list(big[rank].chunk(n)))
    assert torch.equal(out, sum(big)[rank * 3:(rank + 1) * 3]), "reduce_scatter"
    out2 = torch.empty(3, 4)
    dist.reduce_scatter_tensor(out2, big[rank])
    assert torch.equal(out2, out), "reduce_scatter_tensor"

    a2a = torch.empty(n * 3, 4)
    dist.all_to_all_single(a2a, big[rank])
    assert torch.equal(a2a, torch.cat([big[q][rank * 3:(rank + 1) * 3] for q in range(n)])), "all_to_all_single"
    # Uneven splits: rank q sends q + p + 1 rows to rank p.
    send_splits = [rank + p + 1 for p in range(n)]
    recv_splits = [q + rank + 1 for q in range(n)]
    src = values(rank, (sum(send_splits), 2), salt=11)
    dst = torch.empty(sum(recv_splits), 2)
    dist.all_to_all_single(dst, src, recv_splits, send_splits)
    expect = torch.cat([values(q, (sum(q + p + 1 for p in range(n)), 2), salt=11)
                        .split([q + p + 1 for p in range(n)])[rank] for q in range(n)])
    assert torch.equal(dst, expect), "all_to_all_single with uneven splits"
    lists_out = [torch.empty(2) for _ in range(n)]
    dist.all_to_all(lists_out, [torch.full((2,), float(rank * 10 + p)) for p in range(n)])
    assert all(torch.equal(lists_out[q], torch.full((2,), float(q * 10 + rank))) for q in range(n)), "all_to_all"

    if rank == 0:
        dist.send(torch.arange(6.0), dst=1)
        got = torch.empty(3, dtype=torch.int64)
        dist.recv(got, src=n - 1)
        assert torch.equal(got, torch.tensor([7, 8, 9])), "recv"
    if rank == 1:
        got = torch.empty(6)
        dist.recv(got, src=0)
        assert torch.equal(got, torch.arange(6.0)), "send/recv"
    if rank == n - 1:
        dist.send(torch.tensor([7, 8, 9]), dst=0)

    gathered = [torch.empty(2) for _ in range(n)] if rank == 0 else None
    dist.gather(torch.full((2,), float(rank)), gathered, dst=0)
    if rank == 0:
        assert all(torch.equal(gathered[q], torch.full((2,), float(q))) for q in range(n)), "gather"
    piece = torch.empty(2)
    dist.scatter(piece, [torch.full((2,), float(q + 100)) for q in range(n)] if rank == 0 else None, src=0)
    assert torch.equal(piece, torch.full((2,), float(rank + 100))), "scatter"

    objs = [None] * n
    dist.all_gather_object(objs, {"rank": rank})
    assert objs == [{"rank": q} for q in range(n)], "all_gather_object"
    dist.barrier()

    group = dist.new_group([0, n - 1])
    if rank in (0, n - 1):
        g = torch.ones(3)
        dist.all_reduce(g, group=group)
        assert torch.equal(g, torch.full((3,), 2.0)), "all_reduce on a new group"
    dist.destroy_process_group()
    return True


@pytest.mark.parametrize("n", [2, 3])
def test_every_collective_under_a_torchrun_environment(n):
    assert all(run_ranks(n, collectives, timeout=120))


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))


def _batch(rank):
    g = torch.Generator().manual_seed(100 + rank)
    return torch.randn(4, 8, generator=g), torch.randn(4, 1, generator=g)


def ddp_step(rank, n, address):
    init(rank, n, address)
    model = torch.nn.parallel.DistributedDataParallel(_model())
    x, y = _batch(rank)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    weights = [p.detach().tolist() for p in model.parameters()]  # plain lists cross the queue
    dist.destroy_process_group()
    return weights


def test_distributed_data_parallel_matches_one_process():
    n = 2
    got = run_ranks(n, ddp_step, timeout=120)
    # One process, the same model: the mean of the ranks' losses over the
    # concatenated batches has the gradient DDP averages.
    ref = _model()
    xs, ys = zip(*[_batch(r) for r in range(n)])
    opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        sum(torch.nn.functional.mse_loss(ref(x), y) for x, y in zip(xs, ys)).div(n).backward()
        opt.step()
    for rank_weights in got:
        for p, q in zip(rank_weights, ref.parameters()):
            assert torch.allclose(torch.tensor(p), q.detach(), atol=1e-6), (p, q)


def test_torchrun_launches_it():
    script = textwrap.dedent("""
        import torch, torch.distributed as dist
        import plugboard.torch_backend
        dist.init_process_group("plugboard")
        t = torch.full((3,), float(dist.get_rank() + 1))
        dist.all_reduce(t)
        assert torch.equal(t, torch.full((3,), 3.0)), t
        dist.barrier()
        assert dist.get_backend() == "plugboard"
        dist.destroy_process_group()
        print("ok", flush=True)
    """)
    env = dict(os.environ, PLUGBOARD_TRANSPORTS="ethernet", PLUGBOARD_TIMEOUT="20", OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
           "--master-port", str(free_port()), "--no-python", sys.executable, "-c", script]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("ok") == 2, out.stdout + out.stderr
