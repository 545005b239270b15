"""The programs Plugboard ships, for any rank count: generated plans come
from here (python -m plugboard_dsl NAME --nranks N -o plan.json)."""
from .program import Program, ValidationError


def allgather_allpairs(n, channel="memory"):
    """Every rank puts its input straight into every peer's output."""
    p = Program("allgather_allpairs", "allgather", n, input_chunks=1, output_chunks=n)
    for r in range(n):
        me = p.rank(r)
        p.copy(me.input[0], me.output[r], tb=0)
        for q in range(n):
            if q != r:
                ch = p.channel(r, q, channel)
                ch.put(me.input[0], p.rank(q).output[r], tb=q)
                ch.signal(tb=q)
                ch.wait(tb=q)
    return p


def allgather_allpairs_get(n, channel="memory"):
    """Every rank reads every peer's input straight into its own output
    (get), then tells that peer it has read it. Memory channels only."""
    if channel != "memory":
        raise ValidationError(f"allgather_allpairs_get reads peer memory: memory channels only, not {channel!r}")
    p = Program("allgather_allpairs_get", "allgather", n, input_chunks=1, output_chunks=n)
    for r in range(n):
        me = p.rank(r)
        p.copy(me.input[0], me.output[r], tb=0)
        for q in range(n):
            if q != r:
                ch = p.channel(r, q, "memory")
                ch.get(p.rank(q).input[0], me.output[q], tb=q)
                ch.signal(tb=q)
                ch.wait(tb=q)
    return p


def allgather_ring(n, channel="memory"):
    """Each rank forwards the chunk it received last to the next rank, n - 1 steps."""
    p = Program("allgather_ring", "allgather", n, input_chunks=1, output_chunks=n)
    for r in range(n):
        me, nxt = p.rank(r), p.rank((r + 1) % n)
        p.copy(me.input[0], me.output[r], tb=0)
        if n == 1:
            continue
        to_next, from_prev = p.channel(r, (r + 1) % n, channel), p.channel(r, (r - 1) % n, channel)
        for s in range(n - 1):
            c = (r - s) % n
            to_next.put(me.output[c], nxt.output[c], tb=0)
            to_next.signal(tb=0)
            from_prev.wait(tb=0)
    return p


def allreduce_allpairs(n, channel="memory"):
    """One shot: every rank puts its input into every peer's scratch, then reduces."""
    p = Program("allreduce_allpairs", "allreduce", n, input_chunks=1, output_chunks=1, scratch_chunks=n)
    for r in range(n):
        me = p.rank(r)
        for q in range(n):
            if q != r:
                ch = p.channel(r, q, channel)
                ch.put(me.input[0], p.rank(q).scratch[r], tb=0)
                ch.signal(tb=0)
        for q in range(n):
            if q != r:
                p.channel(r, q, channel).wait(tb=0)
        p.reduce(me.output[0], [me.input[0]] + [me.scratch[q] for q in range(n) if q != r], tb=0)
    return p


def allreduce_allpairs_blocks(n, channel="memory"):
    """One shot with a thread block per peer (1 + q): the puts to every
    peer run at once; a barrier then lets thread block 0 reduce."""
    p = Program("allreduce_allpairs_blocks", "allreduce", n, input_chunks=1, output_chunks=1, scratch_chunks=n)
    if n == 1:
        return _one_rank(p)
    for r in range(n):
        me, peers = p.rank(r), [q for q in range(n) if q != r]
        for q in peers:
            ch = p.channel(r, q, channel)
            ch.put(me.input[0], p.rank(q).scratch[r], tb=1 + q)
            ch.signal(tb=1 + q)
            ch.wait(tb=1 + q)
        p.barrier(r, [0] + [1 + q for q in peers])
        p.reduce(me.output[0], [me.input[0]] + [me.scratch[q] for q in peers], tb=0)
    return p


def allreduce_allpairs_twoshot(n, channel="memory"):
    """Two shots: rank r collects chunk r of every peer's input in its
    scratch and reduces it (reduce-scatter), then puts the result into
    every peer's output (allgather). Half the memory traffic of one shot
    for large messages."""
    p = Program("allreduce_allpairs_twoshot", "allreduce", n, input_chunks=n, output_chunks=n, scratch_chunks=n)
    if n == 1:
        return _one_rank(p)
    for r in range(n):
        me, peers = p.rank(r), [q for q in range(n) if q != r]
        for q in peers:
            ch = p.channel(r, q, channel)
            ch.put(me.input[q], p.rank(q).scratch[r], tb=0)
            ch.signal(tb=0)
        for q in peers:
            p.channel(r, q, channel).wait(tb=0)
        p.reduce(me.output[r], [me.input[r]] + [me.scratch[q] for q in peers], tb=0)
        for q in peers:
            ch = p.channel(r, q, channel)
            ch.put(me.output[r], p.rank(q).output[r], tb=0)
            ch.signal(tb=0)
        for q in peers:
            p.channel(r, q, channel).wait(tb=0)
    return p


def allreduce_ring(n, channel="memory"):
    """Ring reduce-scatter then ring allgather: 2(n - 1) steps of 1/n of the data."""
    p = Program("allreduce_ring", "allreduce", n, input_chunks=n, output_chunks=n, scratch_chunks=max(n - 1, 1))
    for r in range(n):
        me, nxt = p.rank(r), p.rank((r + 1) % n)
        p.copy(me.input[0:n], me.output[0:n], tb=0)
        if n == 1:
            continue
        to_next, from_prev = p.channel(r, (r + 1) % n, channel), p.channel(r, (r - 1) % n, channel)
        for s in range(n - 1):  # reduce-scatter: afterwards rank r holds chunk r + 1 reduced
            to_next.put(me.output[(r - s) % n], nxt.scratch[s], tb=0)
            to_next.signal(tb=0)
            from_prev.wait(tb=0)
            c = (r - s - 1) % n
            p.reduce(me.output[c], [me.output[c], me.scratch[s]], tb=0)
        for s in range(n - 1):  # allgather of the reduced chunks
            c = (r + 1 - s) % n
            to_next.put(me.output[c], nxt.output[c], tb=0)
            to_next.signal(tb=0)
            from_prev.wait(tb=0)
    return p


def _one_rank(p):
    """A one-rank program: its output is its input."""
    p.copy(p.rank(0).input[0:p.buffer_chunks["input"]], p.rank(0).output[0:p.buffer_chunks["output"]], tb=0)
    return p


def allreduce_allpairs_packets(n, channel="memory"):
    """One shot of LL packets: every rank sends its whole input to every
    peer as packets and reduces them with its own as they arrive."""
    p = Program("allreduce_allpairs_packets", "allreduce", n, protocol="ll", input_chunks=1, output_chunks=1,
                packet_chunks=n)
    if n == 1:
        return _one_rank(p)
    for r in range(n):
        me, peers = p.rank(r), [q for q in range(n) if q != r]
        for q in peers:
            p.channel(r, q, channel).put_packet(me.input[0], p.rank(q).packets[r], tb=0)
        p.reduce_packet(me.output[0], [me.input[0]], [me.packets[q] for q in peers], tb=0)
    return p


def allreduce_packets(n, channel="memory"):
    """Two shots of LL packets: rank r reduces chunk r of every rank's input
    as the packets arrive, then sends the result to every rank as packets."""
    p = Program("allreduce_packets", "allreduce", n, protocol="ll", input_chunks=n, output_chunks=n,
                packet_chunks=2 * n)
    if n == 1:
        return _one_rank(p)
    for r in range(n):
        me, peers = p.rank(r), [q for q in range(n) if q != r]
        for q in peers:  # reduce-scatter: chunk q of this rank's input to rank q's packets[r]
            p.channel(r, q, channel).put_packet(me.input[q], p.rank(q).packets[r], tb=0)
        sends = [(p.channel(r, q, channel), p.rank(q).packets[n + r]) for q in peers]
        p.read_reduce_copy_send(me.output[r], [me.input[r]], [me.packets[q] for q in peers], sends, tb=0)
        for q in peers:  # allgather: rank q's reduced chunk arrives in packets[n + q]
            p.reduce_packet(me.output[q], [], [me.packets[n + q]], tb=0)
    return p


def allreduce_switch(n, channel="memory"):
    """Through switch channels (NVLink SHARP multicast where the GPUs have
    it, else peer mappings): every rank copies its input into its scratch,
    bound to one switch channel; once every rank has (memory channels
    signal it), rank r reduces chunk r over every rank's scratch and stores
    the result into chunk r of its output, bound to another switch
    channel, and from there into chunk r of every rank's output; a
    last signal round tells each rank that its output is complete."""
    if channel != "memory":
        raise ValidationError(f"allreduce_switch orders its switch group with memory channels only, not {channel!r}")
    p = Program("allreduce_switch", "allreduce", n, input_chunks=n, output_chunks=n, scratch_chunks=n)
    if n == 1:
        return _one_rank(p)
    for r in range(n):
        me, peers = p.rank(r), [q for q in range(n) if q != r]
        inputs, outputs = p.switch_channel(r, "scratch"), p.switch_channel(r, "output")
        p.copy(me.input[0:n], me.scratch[0:n], tb=0)
        for q in peers:
            p.channel(r, q, "memory").signal(tb=0)
        for q in peers:
            p.channel(r, q, "memory").wait(tb=0)
        inputs.reduce(me.scratch[r], me.output[r], tb=0)
        outputs.broadcast(me.output[r], me.output[r], tb=0)  # into every other rank's output[r] too
        for q in peers:
            p.channel(r, q, "memory").signal(tb=0)
        for q in peers:
            p.channel(r, q, "memory").wait(tb=0)
    return p


def alltoall_allpairs(n, channel="memory"):
    """Input chunk q goes straight into rank q's output chunk r."""
    p = Program("alltoall_allpairs", "alltoall", n, input_chunks=n, output_chunks=n)
    for r in range(n):
        me = p.rank(r)
        p.copy(me.input[r], me.output[r], tb=0)
        for q in range(n):
            if q != r:
                ch = p.channel(r, q, channel)
                ch.put(me.input[q], p.rank(q).output[r], tb=q)
                ch.signal(tb=q)
                ch.wait(tb=q)
    return p


SHIPPED = {f.__name__: f for f in (allgather_allpairs, allgather_allpairs_get, allgather_ring, allreduce_allpairs, allreduce_allpairs_blocks,
                                   allreduce_allpairs_packets, allreduce_allpairs_twoshot, allreduce_packets,
                                   allreduce_ring, allreduce_switch, alltoall_allpairs)}

# Programs over memory channels only, so no port plans: those that read peer
# memory (get) and those with switch channels (one NVLink domain).
MEMORY_ONLY = frozenset({"allgather_allpairs_get", "allreduce_switch"})
