"""Programs: buffers cut into chunks, channels between ranks, operations on
thread blocks. See the package docstring."""
from dataclasses import dataclass, field

COLLECTIVES = ("allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "reduce", "custom")
PROTOCOLS = ("simple", "ll")
CHANNEL_TYPES = ("memory", "port")
BUFFERS = ("input", "output", "scratch", "packets")
# Buffers a switch channel can be bound to (the same buffer of every rank, as a group).
SWITCH_BUFFERS = ("output", "scratch")
# Operations of each protocol: an LL program moves data between ranks only as
# packets (each carries its call's flag, so no signal or wait is needed).
SIMPLE_ONLY = ("put", "get", "signal", "wait", "flush", "switch_reduce", "switch_broadcast")
LL_ONLY = ("put_packet", "reduce_packet")


class ValidationError(ValueError):
    """A program that cannot run as written; the message says where."""


@dataclass(frozen=True)
class Chunk:
    """Chunks [index, index + size) of one rank's buffer."""

    rank: int
    buffer: str
    index: int
    size: int

    def overlaps(self, other):
        return (self.rank == other.rank and self.buffer == other.buffer and self.index < other.index + other.size
                and other.index < self.index + self.size)

    def __str__(self):
        return f"rank {self.rank} {self.buffer}[{self.index}:{self.index + self.size}]"


class BufferView:
    """rank.input[2], rank.output[0:4]: chunks of one buffer, bounds-checked."""

    def __init__(self, program, rank, name):
        self._program, self._rank, self._name = program, rank, name

    def __getitem__(self, key):
        count = self._program.buffer_chunks[self._name]
        if isinstance(key, slice):
            if key.step not in (None, 1):
                raise ValidationError(f"rank {self._rank} {self._name}[{key}]: chunk ranges take no step")
            start = 0 if key.start is None else key.start
            stop = count if key.stop is None else key.stop
        else:
            start, stop = key, key + 1
        if not (0 <= start < stop <= count):
            raise ValidationError(f"rank {self._rank} {self._name}[{start}:{stop}] is out of bounds: "
                                  f"the {self._name} buffer has {count} chunks")
        return Chunk(self._rank, self._name, start, stop - start)


class RankView:
    """One rank's buffers: .input, .output, .scratch, .packets (LL programs:
    where peers' put_packet lands, read by reduce_packet)."""

    def __init__(self, program, rank):
        self.rank = rank
        self.input = BufferView(program, rank, "input")
        self.output = BufferView(program, rank, "output")
        self.scratch = BufferView(program, rank, "scratch")
        self.packets = BufferView(program, rank, "packets")


@dataclass
class Op:
    """One operation on (rank, tb); reads and writes are the chunks it touches."""

    kind: str
    rank: int
    tb: int
    channel: "Channel" = None
    switch: "SwitchChannel" = None  # switch_reduce, switch_broadcast
    src: Chunk = None
    dst: Chunk = None
    srcs: tuple = ()
    packets: tuple = ()  # reduce_packet: its packet chunks
    barrier: int = -1  # barrier: its id in the rank
    group: tuple = ()  # barrier: the thread blocks it joins
    reads: list = field(default_factory=list)
    writes: list = field(default_factory=list)
    index: int = -1  # position in its thread block

    def where(self):
        return f"rank {self.rank} thread block {self.tb} operation {self.index} ({self.kind})"


class Channel:
    """rank -> peer of one type (and tag: several channels of a type per pair).
    Its signals are waited for on the peer's channel back to rank of the same
    type and tag."""

    def __init__(self, program, rank, peer, type_, tag, cid):
        self.program, self.rank, self.peer, self.type, self.tag, self.id = program, rank, peer, type_, tag, cid

    def put(self, src, dst, tb):
        """Copies src (a chunk of rank) into dst (a chunk of peer)."""
        self.program._require_protocol("put", tb, self.rank)
        _no_packets("put", src, dst)
        if src.rank != self.rank or dst.rank != self.peer:
            raise ValidationError(f"put on the {self.type} channel rank {self.rank} -> {self.peer}: "
                                  f"source {src} must be on rank {self.rank} and destination {dst} on rank {self.peer}")
        _same_size("put", src, dst)
        return self.program._add(Op("put", self.rank, tb, channel=self, src=src, dst=dst, reads=[src], writes=[dst]))

    def get(self, src, dst, tb):
        """Copies src (a chunk of peer) into dst (a chunk of rank): a read of
        the peer's memory, so memory channels only. Order it after the
        peer's writes to src (a signal from the peer, then a wait here) and
        before the peer's next writes to it (a signal back after it)."""
        self.program._require_protocol("get", tb, self.rank)
        _no_packets("get", src, dst)
        if self.type != "memory":
            raise ValidationError(f"get on rank {self.rank}'s {self.type} channel to {self.peer}: only memory channels "
                                  "read peer memory (port channels move data by put)")
        if src.rank != self.peer or dst.rank != self.rank:
            raise ValidationError(f"get on the memory channel rank {self.rank} -> {self.peer}: source {src} must be "
                                  f"on rank {self.peer} and destination {dst} on rank {self.rank}")
        _same_size("get", src, dst)
        return self.program._add(Op("get", self.rank, tb, channel=self, src=src, dst=dst, reads=[src], writes=[dst]))

    def signal(self, tb):
        """Tells peer that this rank's earlier operations (puts landed, gets done) are complete."""
        self.program._require_protocol("signal", tb, self.rank)
        return self.program._add(Op("signal", self.rank, tb, channel=self))

    def wait(self, tb):
        """Waits for the peer's next signal to this rank (on its channel of this type and tag)."""
        self.program._require_protocol("wait", tb, self.rank)
        return self.program._add(Op("wait", self.rank, tb, channel=self))

    def flush(self, tb):
        """Port channels: waits until this rank's puts on the channel have left its buffers."""
        self.program._require_protocol("flush", tb, self.rank)
        if self.type != "port":
            raise ValidationError(f"flush on rank {self.rank}'s memory channel to {self.peer}: only port channels flush")
        return self.program._add(Op("flush", self.rank, tb, channel=self))

    def put_packet(self, src, dst, tb):
        """LL: sends src (a data chunk of rank) as packets into dst (chunks of
        peer's packets buffer), flagged with the call; peer's reduce_packet
        waits for them there. Each packet chunk takes one put_packet per call."""
        self.program._require_protocol("put_packet", tb, self.rank)
        if src.rank != self.rank or dst.rank != self.peer:
            raise ValidationError(f"put_packet on the {self.type} channel rank {self.rank} -> {self.peer}: source "
                                  f"{src} must be on rank {self.rank} and destination {dst} on rank {self.peer}")
        if src.buffer == "packets" or dst.buffer != "packets":
            raise ValidationError(f"put_packet from {src} to {dst}: the source is a data chunk (input, output, "
                                  "scratch) and the destination a packets chunk")
        _same_size("put_packet", src, dst)
        return self.program._add(Op("put_packet", self.rank, tb, channel=self, src=src, dst=dst, reads=[src],
                                    writes=[dst]))


class SwitchChannel:
    """Rank's switch channel: its `buffer` (output or scratch) and every
    other rank's same buffer reached as one group (NVLink SHARP multicast,
    or peer mappings), as MSCCL++'s SwitchChannel. Every rank declares the
    same switch channels in the same order; order the group's ranks with
    memory channels (signal / wait) between every two of them."""

    def __init__(self, program, rank, buffer, tag, sid):
        self.program, self.rank, self.buffer, self.tag, self.id = program, rank, buffer, tag, sid

    def _group(self, chunk, role):
        if chunk.rank != self.rank or chunk.buffer != self.buffer:
            raise ValidationError(f"{role} {chunk} of a switch operation on rank {self.rank}'s switch channel "
                                  f"{self.id}: must be a chunk of rank {self.rank}'s {self.buffer}, the bound buffer")
        return [Chunk(m, self.buffer, chunk.index, chunk.size) for m in range(self.program.nranks)]

    def reduce(self, src, dst, tb):
        """dst (a data chunk of rank) = the call's reduction over every
        rank's src (a chunk of the bound buffer, the same chunk on each)."""
        group = self._check("switch_reduce", tb, bound=(src, "source"), local=(dst, "destination"))
        return self.program._add(Op("switch_reduce", self.rank, tb, switch=self, src=src, dst=dst, reads=group,
                                    writes=[dst]))

    def broadcast(self, src, dst, tb):
        """Stores src (a data chunk of rank) into dst (a chunk of the bound
        buffer) on every rank."""
        group = self._check("switch_broadcast", tb, bound=(dst, "destination"), local=(src, "source"))
        return self.program._add(Op("switch_broadcast", self.rank, tb, switch=self, src=src, dst=dst, reads=[src],
                                    writes=group))

    def _check(self, kind, tb, bound, local):
        """A switch operation's chunks: bound (chunk, role) in the bound
        buffer of this rank, local (chunk, role) a data chunk of this rank,
        the same size. Returns the bound chunk on every rank."""
        self.program._require_protocol(kind, tb, self.rank)
        group = self._group(*bound)
        chunk, role = local
        _no_packets(kind, chunk)
        if chunk.rank != self.rank:
            raise ValidationError(f"{kind} on rank {self.rank}: {role} {chunk} must be on rank {self.rank}")
        _same_size(kind, bound[0], chunk)
        return group


def _no_packets(what, *chunks):
    for c in chunks:
        if c.buffer == "packets":
            raise ValidationError(f"{what} touches {c}: packets chunks are written by put_packet and read by "
                                  "reduce_packet only")


def _same_size(what, *chunks):
    if len({c.size for c in chunks}) != 1:
        raise ValidationError(f"{what}: chunks of different sizes: " + ", ".join(str(c) for c in chunks))


class Program:
    """A collective algorithm for nranks ranks. Buffers are cut into
    input_chunks, output_chunks and scratch_chunks equal chunks (a scratch
    chunk is the size of an input chunk)."""

    def __init__(self, name, collective, nranks, in_place=False, protocol="simple", instances=1,
                 input_chunks=1, output_chunks=1, scratch_chunks=0, packet_chunks=0):
        if collective not in COLLECTIVES:
            raise ValidationError(f"collective {collective!r} is not one of {', '.join(COLLECTIVES)}")
        if protocol not in PROTOCOLS:
            raise ValidationError(f"protocol {protocol!r} is not one of {', '.join(PROTOCOLS)}")
        for what, v, least in (("nranks", nranks, 1), ("instances", instances, 1), ("input_chunks", input_chunks, 1),
                               ("output_chunks", output_chunks, 1), ("scratch_chunks", scratch_chunks, 0),
                               ("packet_chunks", packet_chunks, 0)):
            if not isinstance(v, int) or v < least:
                raise ValidationError(f"{what} must be an integer >= {least}, got {v!r}")
        if packet_chunks and protocol != "ll":
            raise ValidationError(f"packet_chunks={packet_chunks} needs protocol='ll' (packets are LL's)")
        self.name, self.collective, self.nranks = name, collective, nranks
        self.in_place, self.protocol, self.instances = bool(in_place), protocol, instances
        self.buffer_chunks = {"input": input_chunks, "output": output_chunks, "scratch": scratch_chunks,
                              "packets": packet_chunks}
        self.channels = {}  # (rank, peer, type, tag) -> Channel
        self.switches = {}  # rank -> [SwitchChannel], in the order made
        self.threadblocks = {}  # (rank, tb) -> [Op]
        self.barriers = {}  # rank -> barriers made so far

    def rank(self, r):
        """The buffers of rank r."""
        self._check_rank(r, "rank")
        return RankView(self, r)

    def channel(self, rank, peer, type_="memory", tag=0):
        """The channel rank -> peer of this type and tag (made on first use)."""
        self._check_rank(rank, "channel rank")
        self._check_rank(peer, "channel peer")
        if rank == peer:
            raise ValidationError(f"a channel from rank {rank} to itself")
        if type_ not in CHANNEL_TYPES:
            raise ValidationError(f"channel type {type_!r} is not one of {', '.join(CHANNEL_TYPES)}")
        key = (rank, peer, type_, tag)
        if key not in self.channels:
            cid = sum(1 for k in self.channels if k[0] == rank)
            self.channels[key] = Channel(self, rank, peer, type_, tag, cid)
        return self.channels[key]

    def switch_channel(self, rank, buffer, tag=0):
        """Rank's switch channel bound to its `buffer` (output or scratch),
        made on first use. Every rank must make the same ones, in the same
        order (validate checks)."""
        self._check_rank(rank, "switch channel rank")
        if buffer not in SWITCH_BUFFERS:
            raise ValidationError(f"rank {rank}: a switch channel binds {' or '.join(SWITCH_BUFFERS)}, not {buffer!r}")
        mine = self.switches.setdefault(rank, [])
        for sw in mine:
            if sw.buffer == buffer:
                if sw.tag != tag:
                    raise ValidationError(f"rank {rank}'s {buffer} is bound to switch channel {sw.id} (tag {sw.tag}) "
                                          f"already; a buffer takes one switch channel")
                return sw
        mine.append(SwitchChannel(self, rank, buffer, tag, len(mine)))
        return mine[-1]

    def copy(self, src, dst, tb):
        """dst = src, both chunks of one rank."""
        if src.rank != dst.rank:
            raise ValidationError(f"copy from {src} to {dst}: both must be on one rank (use a channel's put)")
        _no_packets("copy", src, dst)
        _same_size("copy", src, dst)
        return self._add(Op("copy", src.rank, tb, src=src, dst=dst, reads=[src], writes=[dst]))

    def reduce(self, dst, srcs, tb):
        """dst = the call's reduction op over srcs (dst may be one of them), all on one rank."""
        srcs = tuple(srcs)
        if not srcs:
            raise ValidationError(f"reduce into {dst} with no sources")
        if any(s.rank != dst.rank for s in srcs):
            raise ValidationError(f"reduce into {dst}: every source must be on rank {dst.rank}")
        _no_packets("reduce", dst, *srcs)
        _same_size("reduce", dst, *srcs)
        return self._add(Op("reduce", dst.rank, tb, dst=dst, srcs=srcs, reads=list(srcs), writes=[dst]))

    def barrier(self, rank, tbs):
        """Joins thread blocks tbs of rank: each waits at this point until all
        have reached it, so what any did before happens before what any
        does after (the way to order thread blocks of one rank; peers are
        ordered by signal and wait). Returns the barrier's operations."""
        self._check_rank(rank, "barrier rank")
        group = tuple(sorted(set(tbs)))
        if len(group) != len(tuple(tbs)) or len(group) < 2:
            raise ValidationError(f"rank {rank}: a barrier joins two or more distinct thread blocks, got {list(tbs)!r}")
        bid = self.barriers.get(rank, 0)
        self.barriers[rank] = bid + 1
        return [self._add(Op("barrier", rank, tb, barrier=bid, group=group)) for tb in group]

    def reduce_packet(self, dst, srcs, packets, tb):
        """LL: waits for the packets chunks to arrive (a peer's put_packet of
        this call), then dst = the call's reduction over srcs (data chunks,
        may be empty) and the packets' data, in that order; with one packets
        chunk and no srcs it unpacks. All on one rank."""
        srcs, packets = tuple(srcs), tuple(packets)
        self._require_protocol("reduce_packet", tb, dst.rank)
        if not packets:
            raise ValidationError(f"reduce_packet into {dst} with no packets chunks (use reduce)")
        if any(c.rank != dst.rank for c in srcs + packets):
            raise ValidationError(f"reduce_packet into {dst}: every source must be on rank {dst.rank}")
        _no_packets("reduce_packet's destination and data sources", dst, *srcs)
        for c in packets:
            if c.buffer != "packets":
                raise ValidationError(f"reduce_packet into {dst}: {c} is listed among packets but is a data chunk")
        _same_size("reduce_packet", dst, *srcs, *packets)
        return self._add(Op("reduce_packet", dst.rank, tb, dst=dst, srcs=srcs, packets=packets,
                            reads=list(srcs) + list(packets), writes=[dst]))

    def read_reduce_copy_send(self, dst, srcs, packets, sends, tb):
        """LL, MSCCL++'s fused step: reduce_packet into dst, then put_packet
        of dst to each (channel, peer packets chunk) of sends."""
        self.reduce_packet(dst, srcs, packets, tb)
        for channel, peer_chunk in sends:
            channel.put_packet(dst, peer_chunk, tb)

    def _require_protocol(self, kind, tb, rank):
        if kind in SIMPLE_ONLY and self.protocol == "ll":
            raise ValidationError(f"rank {rank} thread block {tb}: {kind} in an LL program (protocol='ll' moves "
                                  "data between ranks with put_packet only)")
        if kind in LL_ONLY and self.protocol != "ll":
            raise ValidationError(f"rank {rank} thread block {tb}: {kind} needs protocol='ll'")

    def _check_rank(self, r, what):
        if not isinstance(r, int) or not 0 <= r < self.nranks:
            raise ValidationError(f"{what} {r!r} is out of range [0, {self.nranks})")

    def _add(self, op):
        if not isinstance(op.tb, int) or op.tb < 0:
            raise ValidationError(f"rank {op.rank}: thread block {op.tb!r} must be an integer >= 0")
        ops = self.threadblocks.setdefault((op.rank, op.tb), [])
        op.index = len(ops)
        ops.append(op)
        return op

    def validate(self):
        """Raises ValidationError for the first problem found (see the package docstring)."""
        from .validate import validate
        validate(self)

    def plan(self):
        """The validated program as a plan (a dict in the documented JSON layout)."""
        from .plan import to_plan
        self.validate()
        return to_plan(self)

    def write(self, path):
        """Validates and writes the plan as JSON to path."""
        import json
        with open(path, "w") as f:
            json.dump(self.plan(), f, indent=1)
            f.write("\n")
