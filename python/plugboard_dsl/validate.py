"""Program checks: bounds and sizes are checked as operations are added;
here the whole program: input writes, signal/wait pairing, LL packets
(each packets chunk put once, every one read also put), deadlock (a cycle
of waits), races (unordered accesses to the same bytes, one a write), gets
the chunk's owner may outlive, and outputs nobody writes."""
from .program import ValidationError


def validate(p):
    ops = [op for key in sorted(p.threadblocks) for op in p.threadblocks[key]]
    _check_buffers(p, ops)
    _check_switches(p, ops)
    writers = _packet_writers(ops)
    edges = _edges(p, writers)
    order = _topological(ops, edges)
    pos, anc = _ancestors(ops, edges, order)
    _check_races(p, ops, pos, anc)
    _check_gets(ops, pos, anc)
    _check_outputs(p, ops)


def _alias(p, chunk):
    """In-place programs: the input is the output, chunk for chunk."""
    if p.in_place and chunk.buffer == "input":
        return type(chunk)(chunk.rank, "output", chunk.index, chunk.size)
    return chunk


def _check_buffers(p, ops):
    if p.in_place and p.buffer_chunks["input"] != p.buffer_chunks["output"]:
        raise ValidationError(f"in-place program with {p.buffer_chunks['input']} input chunks and "
                              f"{p.buffer_chunks['output']} output chunks: in place they are one buffer, cut alike")
    for op in ops:
        for c in op.writes:
            if c.buffer == "input" and not p.in_place:
                raise ValidationError(f"{op.where()} writes {c}: the input of an out-of-place program is read-only")


def _check_switches(p, ops):
    """Switch channels: the same on every rank, in the same order; no port
    channels beside them and a memory channel between every two ranks (over
    them the executor's start handshake, or the program's own signals, keep a
    peer's switch accesses inside a rank's call); peers reach a bound buffer
    only through its switch channel."""
    if not p.switches:
        return
    first = [(sw.buffer, sw.tag) for sw in p.switches.get(0, [])]
    for r in range(p.nranks):
        mine = [(sw.buffer, sw.tag) for sw in p.switches.get(r, [])]
        if mine != first:
            raise ValidationError(f"rank {r}'s switch channels {mine} differ from rank 0's {first}: every rank "
                                  "makes the same switch channels (buffer, tag), in the same order")
    for (rank, peer, type_, tag) in p.channels:
        if type_ == "port":
            raise ValidationError(f"rank {rank}'s port channel to rank {peer} in a program with switch channels "
                                  "(a switch group is one NVLink domain: order its ranks with memory channels)")
    for r in range(p.nranks):
        for q in range(p.nranks):
            if q != r and not any(k[0] == r and k[1] == q for k in p.channels):
                raise ValidationError(f"rank {r} has no memory channel to rank {q}; a program with switch channels "
                                      "needs one between every two ranks (over them each call's start handshake, or the "
                                      "program's own signals, keep a peer's switch accesses inside this rank's call)")
    bound = {b for b, _ in first}
    for op in ops:
        remote = op.dst if op.kind == "put" else op.src if op.kind == "get" else None
        home = _alias(p, remote) if remote is not None else None
        if home is not None and home.buffer in bound:
            raise ValidationError(f"{op.where()} touches rank {home.rank}'s {home.buffer}, which is bound to a "
                                  "switch channel: peers reach it only through that channel")


def _packet_writers(ops):
    """(rank, packets chunk index) -> the put_packet that writes it; raises
    for a chunk put twice (a reader could not tell the two apart) and for
    one read but never put (its reader would wait forever)."""
    writers = {}
    for op in ops:
        if op.kind != "put_packet":
            continue
        for i in range(op.dst.index, op.dst.index + op.dst.size):
            first = writers.setdefault((op.dst.rank, i), op)
            if first is not op:
                raise ValidationError(f"{op.where()} puts packets into rank {op.dst.rank} packets[{i}], which "
                                      f"{first.where()} already puts: each packets chunk takes one put_packet per call")
    for op in ops:
        for c in op.packets:
            for i in range(c.index, c.index + c.size):
                if (c.rank, i) not in writers:
                    raise ValidationError(f"{op.where()} waits for rank {c.rank} packets[{i}], which no put_packet "
                                          "writes")
    return writers


def _edges(p, writers):
    """Successors of each op: program order in its thread block, the k-th
    signal rank -> peer to the peer's k-th wait on the matching channel, and
    each put_packet to the reduce_packets that wait for its packets."""
    succ = {}
    for ops in p.threadblocks.values():
        for a, b in zip(ops, ops[1:]):
            succ.setdefault(id(a), []).append(b)
    signals, waits = {}, {}
    for ops in p.threadblocks.values():
        for op in ops:
            ch = op.channel
            if op.kind == "signal":
                signals.setdefault((ch.rank, ch.peer, ch.type, ch.tag), []).append(op)
            elif op.kind == "wait":
                waits.setdefault((ch.peer, ch.rank, ch.type, ch.tag), []).append(op)  # keyed by the signaller
    for key in sorted(set(signals) | set(waits)):
        s, w = signals.get(key, []), waits.get(key, [])
        if len(s) != len(w):
            a, b, type_, tag = key
            first = (w or s)[0]
            raise ValidationError(
                f"rank {a} signals rank {b} {len(s)} times on the {type_} channel (tag {tag}) but rank {b} waits "
                f"{len(w)} times for it; every wait needs its signal (first: {first.where()})")
        for sig, wait in zip(s, w):
            succ.setdefault(id(sig), []).append(wait)
    _barrier_edges(p, succ)
    for ops in p.threadblocks.values():
        for op in ops:
            for c in op.packets:
                for put in {id(writers[(c.rank, i)]): writers[(c.rank, i)] for i in range(c.index, c.index + c.size)}.values():
                    succ.setdefault(id(put), []).append(op)
    return succ


def _barrier_edges(p, succ):
    """A barrier orders what its thread blocks did before it before what
    any of them does after: an edge from each member to the operation after
    every other member. Members reached in different orders make a cycle
    (a deadlock)."""
    groups = {}
    for (rank, tb), ops in p.threadblocks.items():
        for op in ops:
            if op.kind == "barrier":
                groups.setdefault((rank, op.barrier), []).append((op, ops))
    for members in groups.values():
        for op, _ in members:
            for other, other_ops in members:
                if other is not op and other.index + 1 < len(other_ops):
                    succ.setdefault(id(op), []).append(other_ops[other.index + 1])


def _topological(ops, succ):
    indegree = {id(op): 0 for op in ops}
    for targets in succ.values():
        for t in targets:
            indegree[id(t)] += 1
    ready = [op for op in ops if indegree[id(op)] == 0]
    order = []
    while ready:
        op = ready.pop()
        order.append(op)
        for t in succ.get(id(op), []):
            indegree[id(t)] -= 1
            if indegree[id(t)] == 0:
                ready.append(t)
    if len(order) != len(ops):
        stuck = [op for op in ops if indegree[id(op)] > 0 and op.kind in ("wait", "reduce_packet", "barrier")]
        first = (stuck or [op for op in ops if indegree[id(op)] > 0])[0]
        raise ValidationError(f"deadlock: {first.where()} waits for a signal, packets or a barrier's thread blocks "
                              f"that come only after it (a cycle of waits among {len(ops) - len(order)} operations)")
    return order


def _ancestors(ops, succ, order):
    """Each op's position in order, and its ancestors as a bit set over positions."""
    pos = {id(op): i for i, op in enumerate(order)}
    preds = {id(op): [] for op in ops}
    for src, targets in succ.items():
        for t in targets:
            preds[id(t)].append(src)
    anc = {}
    for op in order:
        bits = 0
        for pr in preds[id(op)]:
            bits |= anc[pr] | (1 << pos[pr])
        anc[id(op)] = bits
    return pos, anc


def _check_gets(ops, pos, anc):
    """A get reads the peer's memory while the peer runs: some operation of
    the peer must come after it, or the peer could end its call (and its
    next call overwrite the chunk) before the read."""
    for get in (op for op in ops if op.kind == "get"):
        owner = get.channel.peer
        if not any(op.rank == owner and (anc[id(op)] >> pos[id(get)]) & 1 for op in ops):
            raise ValidationError(f"{get.where()} reads {get.src}, but no operation of rank {owner} comes after it: "
                                  f"rank {owner} could end its call before the read (signal rank {owner} after the "
                                  "get and let it wait for that)")


def _check_races(p, ops, pos, anc):
    accesses = [(op, _alias(p, c), False) for op in ops for c in op.reads]
    accesses += [(op, _alias(p, c), True) for op in ops for c in op.writes]
    by_buffer = {}
    for a in accesses:
        by_buffer.setdefault((a[1].rank, a[1].buffer), []).append(a)
    for group in by_buffer.values():
        for i, (op1, c1, w1) in enumerate(group):
            for op2, c2, w2 in group[i + 1:]:
                if op1 is op2 or not (w1 or w2) or not c1.overlaps(c2):
                    continue
                ordered = (anc[id(op2)] >> pos[id(op1)]) & 1 or (anc[id(op1)] >> pos[id(op2)]) & 1
                if not ordered:
                    raise ValidationError(f"race on {c1 if w1 else c2}: {op1.where()} and {op2.where()} touch it "
                                          "with no signal/wait, barrier or thread-block order between them")


def _check_outputs(p, ops):
    if p.in_place:
        return
    written = {}
    for op in ops:
        for c in op.writes:
            if c.buffer == "output":
                for i in range(c.index, c.index + c.size):
                    written[(c.rank, i)] = True
    for r in range(p.nranks):
        for i in range(p.buffer_chunks["output"]):
            if (r, i) not in written:
                raise ValidationError(f"rank {r} output[{i}] is never written")
