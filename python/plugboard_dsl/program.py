"""Programs: buffers cut into chunks, channels between ranks, operations on
thread blocks. See the package docstring."""
from dataclasses import dataclass, field

COLLECTIVES = ("allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "reduce", "custom")
PROTOCOLS = ("simple",)
CHANNEL_TYPES = ("memory", "port")
BUFFERS = ("input", "output", "scratch")


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
    """One rank's buffers: .input, .output, .scratch."""

    def __init__(self, program, rank):
        self.rank = rank
        self.input = BufferView(program, rank, "input")
        self.output = BufferView(program, rank, "output")
        self.scratch = BufferView(program, rank, "scratch")


@dataclass
class Op:
    """One operation on (rank, tb); reads and writes are the chunks it touches."""

    kind: str
    rank: int
    tb: int
    channel: "Channel" = None
    src: Chunk = None
    dst: Chunk = None
    srcs: tuple = ()
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
        if src.rank != self.rank or dst.rank != self.peer:
            raise ValidationError(f"put on the {self.type} channel rank {self.rank} -> {self.peer}: "
                                  f"source {src} must be on rank {self.rank} and destination {dst} on rank {self.peer}")
        _same_size("put", src, dst)
        return self.program._add(Op("put", self.rank, tb, channel=self, src=src, dst=dst, reads=[src], writes=[dst]))

    def signal(self, tb):
        """Tells peer that this rank's earlier puts on this channel have landed."""
        return self.program._add(Op("signal", self.rank, tb, channel=self))

    def wait(self, tb):
        """Waits for the peer's next signal to this rank (on its channel of this type and tag)."""
        return self.program._add(Op("wait", self.rank, tb, channel=self))

    def flush(self, tb):
        """Port channels: waits until this rank's puts on the channel have left its buffers."""
        if self.type != "port":
            raise ValidationError(f"flush on rank {self.rank}'s memory channel to {self.peer}: only port channels flush")
        return self.program._add(Op("flush", self.rank, tb, channel=self))


def _same_size(what, *chunks):
    if len({c.size for c in chunks}) != 1:
        raise ValidationError(f"{what}: chunks of different sizes: " + ", ".join(str(c) for c in chunks))


class Program:
    """A collective algorithm for nranks ranks. Buffers are cut into
    input_chunks, output_chunks and scratch_chunks equal chunks (a scratch
    chunk is the size of an input chunk)."""

    def __init__(self, name, collective, nranks, in_place=False, protocol="simple", instances=1,
                 input_chunks=1, output_chunks=1, scratch_chunks=0):
        if collective not in COLLECTIVES:
            raise ValidationError(f"collective {collective!r} is not one of {', '.join(COLLECTIVES)}")
        if protocol not in PROTOCOLS:
            raise ValidationError(f"protocol {protocol!r} is not one of {', '.join(PROTOCOLS)} "
                                  "(LL packets are not in plan version 1)")
        for what, v, least in (("nranks", nranks, 1), ("instances", instances, 1), ("input_chunks", input_chunks, 1),
                               ("output_chunks", output_chunks, 1), ("scratch_chunks", scratch_chunks, 0)):
            if not isinstance(v, int) or v < least:
                raise ValidationError(f"{what} must be an integer >= {least}, got {v!r}")
        self.name, self.collective, self.nranks = name, collective, nranks
        self.in_place, self.protocol, self.instances = bool(in_place), protocol, instances
        self.buffer_chunks = {"input": input_chunks, "output": output_chunks, "scratch": scratch_chunks}
        self.channels = {}  # (rank, peer, type, tag) -> Channel
        self.threadblocks = {}  # (rank, tb) -> [Op]

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

    def copy(self, src, dst, tb):
        """dst = src, both chunks of one rank."""
        if src.rank != dst.rank:
            raise ValidationError(f"copy from {src} to {dst}: both must be on one rank (use a channel's put)")
        _same_size("copy", src, dst)
        return self._add(Op("copy", src.rank, tb, src=src, dst=dst, reads=[src], writes=[dst]))

    def reduce(self, dst, srcs, tb):
        """dst = the call's reduction op over srcs (dst may be one of them), all on one rank."""
        srcs = tuple(srcs)
        if not srcs:
            raise ValidationError(f"reduce into {dst} with no sources")
        if any(s.rank != dst.rank for s in srcs):
            raise ValidationError(f"reduce into {dst}: every source must be on rank {dst.rank}")
        _same_size("reduce", dst, *srcs)
        return self._add(Op("reduce", dst.rank, tb, dst=dst, srcs=srcs, reads=list(srcs), writes=[dst]))

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
