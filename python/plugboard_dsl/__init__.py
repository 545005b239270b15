"""plugboard_dsl: write a collective algorithm as a Python program, check it,
and compile it to a JSON execution plan (docs/execution-plans.md).

Pure Python, standard library only. A program names its collective, rank
count and buffers (input, output, scratch, each cut into equal chunks), opens
channels between ranks (memory: direct stores through peer mappings; port:
through the proxy and any network transport), and places operations (put,
get (memory channels: a read of the peer's chunk), signal, wait, flush,
copy, reduce) on thread blocks of each rank; a
barrier (Program.barrier(rank, tbs)) orders thread blocks of one rank. An LL
program (protocol="ll", packet_chunks=k) moves data between ranks only as
packets: put_packet into a peer's packets buffer, reduce_packet (or
read_reduce_copy_send) waiting for them, no signals or waits. A switch
channel (Program.switch_channel(rank, "output" or "scratch")) reaches that
buffer of every rank as one group (NVLink SHARP, else peer mappings; GPU
buffers only): .reduce(src, dst, tb) sets a local chunk to the reduction of
a bound chunk over every rank, .broadcast(src, dst, tb) stores a local
chunk into a bound chunk of every rank; memory channels order them::

    from plugboard_dsl import Program
    p = Program("allgather_allpairs", "allgather", nranks=2, input_chunks=1, output_chunks=2)
    for r in range(2):
        p.copy(p.rank(r).input[0], p.rank(r).output[r], tb=0)
        for q in range(2):
            if q != r:
                ch = p.channel(r, q, "memory")
                ch.put(p.rank(r).input[0], p.rank(q).output[r], tb=0)
                ch.signal(tb=0)
                p.channel(r, q, "memory").wait(tb=0)
    plan = p.plan()          # validates, then returns the plan as a dict
    p.write("plan.json")     # or writes it

Validation (Program.validate, run by plan() and write()) raises
ValidationError naming the rank, thread block, operation and chunk: chunks
out of bounds or of unequal sizes, puts and gets whose chunks are not on
the channel's two ranks, a get on a port channel, signals and waits that do not pair up, a wait that can
never be satisfied (a cycle of waits or barriers: deadlock), two operations touching the same
bytes (one of them writing) with no order between them, writes into the
input of an out-of-place program, output chunks nobody writes; in LL
programs, a packets chunk put twice or read but never put; switch channels
that differ between ranks, beside port channels, without a memory channel
between every two ranks, or whose bound buffer a peer's put or get touches.
"""
from .program import Channel, Chunk, Program, SwitchChannel, ValidationError
from .plan import PLAN_VERSION

__all__ = ["Program", "Chunk", "Channel", "SwitchChannel", "ValidationError", "PLAN_VERSION"]
