"""A validated Program as an execution plan: a dict in the JSON layout
docs/execution-plans.md describes (version PLAN_VERSION)."""

PLAN_VERSION = 5


def _chunk(c):
    return {"buffer": c.buffer, "index": c.index, "size": c.size}


def _op(op):
    out = {"op": op.kind}
    if op.channel is not None:
        out["channel"] = op.channel.id
    if op.switch is not None:
        out["switch"] = op.switch.id
    if op.kind in ("put", "get", "copy", "put_packet", "switch_reduce", "switch_broadcast"):
        out["src"], out["dst"] = _chunk(op.src), _chunk(op.dst)
    elif op.kind == "reduce":
        out["dst"], out["srcs"] = _chunk(op.dst), [_chunk(s) for s in op.srcs]
    elif op.kind == "barrier":
        out["barrier"], out["threadblocks"] = op.barrier, list(op.group)
    elif op.kind == "reduce_packet":
        out["dst"], out["srcs"] = _chunk(op.dst), [_chunk(s) for s in op.srcs]
        out["packets"] = [_chunk(c) for c in op.packets]
    return out


def to_plan(p):
    ranks = []
    for r in range(p.nranks):
        channels = sorted((ch for key, ch in p.channels.items() if key[0] == r), key=lambda ch: ch.id)
        tbs = sorted(tb for (rank, tb) in p.threadblocks if rank == r)
        rank = {
            "rank": r,
            "channels": [{"id": ch.id, "peer": ch.peer, "type": ch.type, "tag": ch.tag} for ch in channels],
            "threadblocks": [{"id": tb, "ops": [_op(op) for op in p.threadblocks[(r, tb)]]} for tb in tbs],
        }
        if p.switches:
            rank["switches"] = [{"id": sw.id, "buffer": sw.buffer, "tag": sw.tag} for sw in p.switches.get(r, [])]
        ranks.append(rank)
    return {
        "plan_version": PLAN_VERSION,
        "name": p.name,
        "collective": p.collective,
        "nranks": p.nranks,
        "in_place": p.in_place,
        "protocol": p.protocol,
        "instances": p.instances,
        "buffers": dict(p.buffer_chunks),
        "ranks": ranks,
    }
