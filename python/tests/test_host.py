"""The plugboard package on host buffers: every collective checked against
NumPy at odd sizes, buffers of several kinds, bad input, abort, and the
launcher's environment."""

import multiprocessing as mp
import os
import threading
import time

import numpy as np
import pytest

import plugboard
from ranks import TEST_SETTINGS, run_ranks


def join(rank, n, address, **kw):
    uid = plugboard.unique_id_from_address(address)
    return plugboard.Communicator(rank, n, uid, timeout=30, settings={**TEST_SETTINGS, **kw})


def data(rank, count, dtype, salt=0):
    """Rank-dependent values that every rank can also compute for any other."""
    return ((np.arange(count) * 7 + rank * 13 + salt) % 23 + 1).astype(dtype)


def every_collective(rank, n, address, count, dtype):
    comm = join(rank, n, address)
    everyone = [data(r, count, dtype) for r in range(n)]
    mine = everyone[rank]

    out = np.empty_like(mine)
    comm.all_reduce(mine, out, op="sum")
    assert np.array_equal(out, np.sum(everyone, axis=0, dtype=dtype)), "all_reduce sum"
    inplace = mine.copy()
    comm.all_reduce(inplace, op="max")
    assert np.array_equal(inplace, np.max(everyone, axis=0)), "all_reduce max in place"
    comm.all_reduce(mine, out, op="min")
    assert np.array_equal(out, np.min(everyone, axis=0)), "all_reduce min"

    gathered = np.empty(count * n, dtype=dtype)
    comm.all_gather(mine, gathered)
    assert np.array_equal(gathered, np.concatenate(everyone)), "all_gather"

    big = [data(r, count * n, dtype, salt=5) for r in range(n)]
    block = np.empty(count, dtype=dtype)
    comm.reduce_scatter(big[rank], block, op="sum")
    assert np.array_equal(block, np.sum(big, axis=0, dtype=dtype)[rank * count:(rank + 1) * count]), "reduce_scatter"

    root = n - 1
    b = mine.copy() if rank == root else np.zeros_like(mine)
    comm.broadcast(b, root=root)
    assert np.array_equal(b, everyone[root]), "broadcast"

    red = np.zeros_like(mine)
    comm.reduce(mine, red, op="sum", root=0)
    if rank == 0:
        assert np.array_equal(red, np.sum(everyone, axis=0, dtype=dtype)), "reduce"

    a2a = np.empty(count * n, dtype=dtype)
    comm.all_to_all(big[rank], a2a)
    expect = np.concatenate([big[r][rank * count:(rank + 1) * count] for r in range(n)])
    assert np.array_equal(a2a, expect), "all_to_all"

    nxt, prv = (rank + 1) % n, (rank - 1) % n
    got = np.empty(count + rank, dtype=dtype)  # lengths differ by pair
    comm.send_recv(data(rank, count + nxt, dtype, salt=9), nxt, got, prv)
    assert np.array_equal(got, data(prv, count + rank, dtype, salt=9)), "send_recv"
    comm.barrier()
    return rank


@pytest.mark.parametrize("n,count,dtype", [
    (2, 1, np.float32),
    (2, 1023, np.int32),
    (3, 4097, np.float64),
    (4, 33, np.uint8),
    (2, 300_001, np.float32),
])
def test_every_collective_matches_numpy(n, count, dtype):
    assert run_ranks(n, every_collective, count, dtype) == list(range(n))


def buffer_kinds(rank, n, address):
    comm = join(rank, n, address)
    b = bytearray([rank + 1] * 17)
    comm.all_reduce(b, op="sum")  # uint8 through the buffer protocol
    assert list(b) == [n * (n + 1) // 2] * 17
    mv = memoryview(bytearray(8 * n))
    comm.all_gather(bytes([rank] * 8), mv)
    assert bytes(mv) == b"".join(bytes([r] * 8) for r in range(n))
    odd = np.arange(6, dtype=np.int16) + rank  # no int16 reduction, but it moves as bytes
    comm.broadcast(odd, root=0)
    assert np.array_equal(odd, np.arange(6, dtype=np.int16))
    half = np.full(5, 0.5 * (rank + 1), dtype=np.float16)
    comm.all_reduce(half, op="sum")
    assert np.allclose(half, 0.5 * n * (n + 1) / 2)
    return True


def test_bytes_bytearray_memoryview_and_moved_types():
    assert all(run_ranks(2, buffer_kinds))


def bad_input(rank, n, address):
    comm = join(rank, n, address)
    x = np.ones(8, dtype=np.float32)
    cases = [
        (lambda: comm.all_reduce(x[::2]), ValueError, "contiguous"),
        (lambda: comm.all_reduce(x, _readonly()), ValueError, "read-only"),
        (lambda: comm.all_reduce(np.zeros(3, dtype=np.complex64)), TypeError, "cannot reduce"),
        (lambda: comm.all_reduce(x, op="xor"), ValueError, "unknown reduction"),
        (lambda: comm.all_reduce(x, np.ones(7, dtype=np.float32)), plugboard.Error, "expected 8"),
        (lambda: comm.all_reduce(x, np.ones(8, dtype=np.float64)), plugboard.Error, "input is float"),
        (lambda: comm.all_gather(x, np.ones(8, dtype=np.float32)), plugboard.Error, f"expected {8 * n}"),
        (lambda: comm.all_to_all(np.ones(3, dtype=np.float32), np.ones(3, dtype=np.float32)), plugboard.Error, "equal blocks"),
        (lambda: comm.broadcast(x, root=n), plugboard.Error, f"root {n} is not a rank"),
        (lambda: comm.send(x, -1), plugboard.Error, "peer -1 is not a rank"),
        (lambda: comm.all_reduce(None), TypeError, "is None"),
        (lambda: comm.all_reduce(object()), TypeError, "neither a NumPy array"),
    ]
    for i, (call, kind, words) in enumerate(cases):
        with pytest.raises(kind) as info:
            call()
        assert words in str(info.value), f"case {i}: {info.value}"
        if kind is plugboard.Error:
            assert info.value.code == "invalid usage" and f"rank {rank}" in str(info.value), f"case {i}: {info.value}"
    comm.all_reduce(x)  # still usable afterwards
    assert np.all(x == n)
    comm.close()
    with pytest.raises(plugboard.Error, match="closed"):
        comm.barrier()
    with pytest.raises(plugboard.Error, match="got 32"):
        plugboard.Communicator(rank, n, b"\0" * 32)
    return True


def _readonly():
    a = np.ones(8, dtype=np.float32)
    a.setflags(write=False)
    return a


def test_bad_input_is_a_clear_error_and_the_communicator_goes_on():
    assert all(run_ranks(2, bad_input))


def abort_while_blocked(rank, n, address, aborted):
    comm = join(rank, n, address)
    comm.barrier()
    if rank == 1:
        # Keeps its connections open until rank 0's abort is done, so that
        # only the abort can end rank 0's call.
        assert aborted.wait(30), "rank 0 never said its abort was done"
    else:
        # Rank 1 never joins this allreduce: only the abort ends it.
        threading.Timer(0.3, comm.abort).start()
        start = time.monotonic()
        with pytest.raises(plugboard.Error) as info:
            comm.all_reduce(np.ones(1000, dtype=np.float32))
        took = time.monotonic() - start
        assert info.value.code == "aborted", str(info.value)
        assert took < 5, f"the abort took {took:.2f} s to end the call"
        assert comm.aborted and comm.async_error().code == "aborted"
        aborted.set()
    comm.close()
    return True


def test_abort_from_another_thread_ends_a_blocked_call():
    # The GIL is released while the call waits, or the timer could not run.
    assert all(run_ranks(2, abort_while_blocked, mp.get_context("spawn").Event()))


def peer_gives_up(rank, n, address):
    comm = join(rank, n, address)
    comm.barrier()
    if rank == 1:
        comm.report_failure("its data loader died")
        assert comm.peer_failure() is None
    else:
        # Rank 1 never joins: its report, not the 20 s timeout, ends the call.
        start = time.monotonic()
        with pytest.raises(plugboard.Error) as info:
            comm.all_reduce(np.ones(16, dtype=np.float32))
        took = time.monotonic() - start
        assert info.value.code == "remote error", str(info.value)
        assert "rank 1 (host " in str(info.value) and "its data loader died" in str(info.value)
        assert took < 5, f"the call ended {took:.2f} s in"
        assert "its data loader died" in str(comm.peer_failure())
    comm.close()
    return True


def test_a_peers_reported_failure_ends_a_blocked_call():
    assert all(run_ranks(2, peer_gives_up))


def introspection(rank, n, address):
    comm = join(rank, n, address)
    peer = 1 - rank
    assert comm.rank == rank and comm.size == n
    assert comm.transport_for(peer) == "ethernet"
    assert comm.selection_reason(peer) and comm.loaded_transports() == ["ethernet"]
    timeout = comm.settings()["timeout"]
    assert timeout["value"] in ("20", "20.0", "20.000000") and timeout["source"] == "program", timeout
    assert comm.host_of(peer)
    assert any(s["name"] == "timeout" for s in plugboard.default_settings())
    return True


def test_transports_and_settings_are_visible():
    assert all(run_ranks(2, introspection))


def from_env(rank, n, address):
    comm = plugboard.Communicator.from_env(timeout=30, settings=TEST_SETTINGS)
    info = plugboard.launch_info()
    assert (info["rank"], info["size"], info["root_address"]) == (rank, n, address)
    x = np.array([rank], dtype=np.int64)
    comm.all_reduce(x)
    return int(x[0])


def test_from_env_reads_the_launchers_variables():
    # torchrun's names; PLUGBOARD_BOOTSTRAP_ADDR names the root (without it,
    # MASTER_PORT + 1 would).
    def env_for(n):
        return {"WORLD_SIZE": str(n), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}
    n = 3
    results = run_ranks(n, from_env_with_rank, env_for(n))
    assert results == [sum(range(n))] * n


def from_env_with_rank(rank, n, address, env):
    os.environ.update(env)
    os.environ["RANK"] = str(rank)
    os.environ["PLUGBOARD_BOOTSTRAP_ADDR"] = address
    return from_env(rank, n, address)
