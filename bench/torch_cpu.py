"""dist.all_reduce / all_gather_into_tensor on CPU tensors through the
"plugboard" backend beside Gloo (PyTorch's own CPU backend), in one run on
this machine: each backend in its own set of ranks, the same sizes and
iteration counts. Prints a table (us per call, the slower rank's mean) and
plugboard / gloo.

    .venv/bin/python bench/torch_cpu.py --nranks 2 --max-bytes 16M [--dtype float16]
(PYTHONPATH=build/python for the build tree, or a pip-installed package.)
"""

import argparse
import datetime
import multiprocessing as mp
import os
import queue
import sys
import time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import free_port, parse_bytes  # noqa: E402



def sizes(max_bytes):
    b = 8
    while b <= max_bytes:
        yield b
        b *= 8


def rank_main(rank, n, backend, port, args, out):
    import torch
    import torch.distributed as dist
    if backend == "plugboard":
        import plugboard.torch_backend  # noqa: F401
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(n))
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=60))
    rows = []
    for nbytes in sizes(args.max_bytes):
        dtype = getattr(torch, args.dtype)
        count = max(1, nbytes * 8 // torch.finfo(dtype).bits)
        x = torch.ones(count, dtype=dtype)
        gathered = torch.empty(count * n, dtype=dtype)
        for name, call in (("all_reduce", lambda: dist.all_reduce(x)),
                           ("all_gather", lambda: dist.all_gather_into_tensor(gathered, x))):
            iters = max(5, min(args.iters, int(args.iters * 65536 / max(nbytes, 65536))))
            for _ in range(args.warmup):
                call()
            dist.barrier()
            start = time.perf_counter()
            for _ in range(iters):
                call()
            us = (time.perf_counter() - start) / iters * 1e6
            worst = torch.tensor([us], dtype=torch.float64)
            dist.all_reduce(worst, op=dist.ReduceOp.MAX)
            rows.append((name, nbytes, worst.item()))
    dist.destroy_process_group()
    if rank == 0:
        out.put(rows)


def run_backend(backend, n, args):
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=rank_main, args=(r, n, backend, port, args, out)) for r in range(n)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + 600
    while True:  # a rank that died ends the run at once, not at the deadline
        try:
            rows = out.get(timeout=1)
            break
        except queue.Empty:
            dead = [r for r, p in enumerate(procs) if p.exitcode not in (None, 0)]
            if dead or time.monotonic() > deadline:
                for p in procs:
                    p.kill()
                sys.exit(f"torch_cpu: {backend}: rank(s) {dead} failed" if dead else f"torch_cpu: {backend}: no result in 600 s")
    for p in procs:
        p.join(60)
    return {(name, nbytes): us for name, nbytes, us in rows}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nranks", type=int, default=2)
    ap.add_argument("--max-bytes", type=parse_bytes, default=parse_bytes("16M"))
    ap.add_argument("--iters", type=int, default=500)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    args = ap.parse_args()
    os.environ.setdefault("PLUGBOARD_TRANSPORTS", "ethernet")
    results = {b: run_backend(b, args.nranks, args) for b in ("plugboard", "gloo")}
    print(f"# {args.nranks} ranks, {args.dtype}, us per call (slowest rank's mean)")
    print(f"{'collective':<12}{'bytes':>10}{'plugboard':>12}{'gloo':>12}{'pb/gloo':>9}")
    for key in results["plugboard"]:
        pb, gl = results["plugboard"][key], results["gloo"][key]
        print(f"{key[0]:<12}{key[1]:>10}{pb:>12.1f}{gl:>12.1f}{pb / gl:>9.2f}")


if __name__ == "__main__":
    main()
