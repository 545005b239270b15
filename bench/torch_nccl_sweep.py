"""dist.all_reduce on GPU tensors through PyTorch's own ProcessGroupNCCL,
once over the real NCCL (torch's own) and once over Plugboard's NCCL API
library put in its place with LD_PRELOAD (its SONAME is libnccl.so.2), in
one run on this machine: the same ranks (one GPU each), sizes and
iteration counts. Prints a table (us per call, the slower rank's mean) and
plugboard / nccl; every size's result is checked once in each run.

    python3 bench/torch_nccl_sweep.py --shim build/lib/plugboard-nccl/libnccl.so.2 \
        --nranks 2 --max-bytes 256M [--csv out.csv]

tests/gpu/run.sh runs it where the machine has two GPUs or more
(step torch-nccl-sweep).
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import free_port, parse_bytes  # noqa: E402



def sizes(max_bytes):
    b = 8
    while b <= max_bytes:
        yield b
        b *= 4


def iterations(nbytes, base):
    """Fewer iterations for large messages, at least 5."""
    return max(5, min(base, int(base * (1 << 20) / max(nbytes, 1 << 20))))


def rank_main(rank, n, port, args):
    import torch
    import torch.distributed as dist
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(n))
    dev = torch.device("cuda", rank)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=120), device_id=dev)
    for nbytes in sizes(args.max_bytes):
        count = max(1, nbytes // 4)
        x = torch.full((count,), float(rank + 1), device=dev)
        dist.all_reduce(x)
        want = n * (n + 1) / 2
        if not torch.all(x == want).item():
            raise RuntimeError(f"rank {rank}: all_reduce of {nbytes} bytes is wrong (want {want} everywhere)")
        iters = iterations(nbytes, args.iters)
        for _ in range(args.warmup):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        dist.barrier()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            dist.all_reduce(x)
        end.record()
        end.synchronize()
        us = start.elapsed_time(end) * 1000.0 / iters
        worst = torch.tensor([us], dtype=torch.float64, device=dev)
        dist.all_reduce(worst, op=dist.ReduceOp.MAX)
        if rank == 0:
            print(json.dumps({"bytes": nbytes, "us": worst.item(), "iters": iters}), flush=True)
    dist.destroy_process_group()


def worker(args):
    import torch.multiprocessing as mp
    mp.spawn(rank_main, args=(args.nranks, free_port(), args), nprocs=args.nranks, join=True)


def run_library(args, shim):
    """Runs the sweep in a child process; shim None means torch's own NCCL."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if shim:
        env["LD_PRELOAD"] = os.path.abspath(shim)
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--nranks", str(args.nranks),
           "--max-bytes", str(args.max_bytes), "--iters", str(args.iters), "--warmup", str(args.warmup)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise SystemExit(f"the sweep over {'Plugboard (' + shim + ')' if shim else 'the real NCCL'} "
                         f"failed with exit code {proc.returncode}")
    rows = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            rows[row["bytes"]] = row["us"]
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shim", help="Plugboard's libnccl.so.2 (required unless --worker)")
    p.add_argument("--nranks", type=int, default=2)
    p.add_argument("--max-bytes", type=parse_bytes, default=parse_bytes("256M"))
    p.add_argument("--iters", type=int, default=200)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--timeout", type=int, default=240, help="seconds for each library's sweep")
    p.add_argument("--csv", help="also write the table here")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args)
        return
    if not args.shim or not os.path.exists(args.shim):
        raise SystemExit(f"--shim must name Plugboard's libnccl.so.2 (got {args.shim!r})")
    import torch
    if torch.cuda.device_count() < args.nranks:
        print(f"SKIP: {args.nranks} ranks need {args.nranks} GPUs, this machine has {torch.cuda.device_count()}")
        return
    ours, real = run_library(args, args.shim), run_library(args, None)
    print(f"# dist.all_reduce float32 sum, {args.nranks} ranks on {torch.cuda.get_device_name(0)}, "
          f"torch {torch.__version__}, NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}")
    lines = ["bytes,plugboard_us,nccl_us,plugboard_over_nccl"]
    for nbytes in sorted(real):
        if nbytes in ours:
            lines.append(f"{nbytes},{ours[nbytes]:.2f},{real[nbytes]:.2f},{ours[nbytes] / real[nbytes]:.2f}")
    print("\n".join(lines))
    if args.csv:
        with open(args.csv, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
