"""Runs a function as n ranks in spawned processes and reports every
rank's failure; nothing outlives the deadline."""

import multiprocessing as mp
import os
import queue
import socket
import traceback

# Every rank's communicator: ethernet on loopback, waits bounded well below
# the test's own deadline.
TEST_SETTINGS = {"transports": "ethernet", "timeout": "20"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _child(fn, rank, n, address, env, args, results):
    try:
        os.environ.update(env)
        results.put((rank, "ok", fn(rank, n, address, *args)))
    except BaseException:  # noqa: B036 - every failure goes back to the parent
        results.put((rank, "error", traceback.format_exc()))


def run_ranks(n, fn, *args, timeout=90, env=None):
    """fn(rank, n, address, *args) in n processes, address being a free
    "127.0.0.1:port" for the bootstrap root. Returns the values by rank;
    raises AssertionError with each failing rank's traceback, or naming
    the ranks that did not finish within timeout seconds (they are killed)."""
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    address = f"127.0.0.1:{free_port()}"
    procs = [ctx.Process(target=_child, args=(fn, r, n, address, env or {}, args, results)) for r in range(n)]
    for p in procs:
        p.start()
    got = {}
    try:
        for _ in range(n):
            rank, status, value = results.get(timeout=timeout)
            got[rank] = (status, value)
    except queue.Empty:
        pass  # the missing ranks are named below
    for p in procs:
        p.join(5)
        if p.is_alive():
            p.kill()
            p.join()
    missing = [r for r in range(n) if r not in got]
    errors = {r: v for r, (s, v) in got.items() if s == "error"}
    if missing or errors:
        lines = [f"ranks that did not finish within {timeout} s: {missing}"] if missing else []
        lines += [f"--- rank {r} failed:\n{tb}" for r, tb in sorted(errors.items())]
        raise AssertionError("\n".join(lines))
    return [got[r][1] for r in range(n)]
