"""A reference interpreter of plans, in Python: runs a plan (the dict of
plan.to_plan, or its JSON) on small numeric buffers, one operation at a
time, a wait only when its signal has arrived. It defines what a plan
means, and lets tests check that a program computes its collective."""


class Deadlock(RuntimeError):
    """No thread block can make progress."""


def run(plan, inputs, reduce=lambda a, b: a + b):
    """inputs[r]: rank r's input chunks (one value per chunk). Returns every
    rank's output chunks (in-place plans: the input, updated)."""
    n = plan["nranks"]
    chunks = plan["buffers"]
    bufs = []
    for r in range(n):
        b = {"input": list(inputs[r]), "output": [None] * chunks["output"], "scratch": [None] * chunks["scratch"],
             "packets": [None] * chunks.get("packets", 0)}
        if plan["in_place"]:
            b["output"] = b["input"]
        bufs.append(b)
    channels = [{c["id"]: c for c in plan["ranks"][r]["channels"]} for r in range(n)]
    pending = {}  # (signaller, receiver, type, tag) -> signals not yet waited for
    arrived = set()  # (rank, packets chunk index) put this call
    at_barrier = {}  # (rank, barrier id) -> thread blocks that have reached it
    pcs = {(r, tb["id"]): 0 for r in range(n) for tb in plan["ranks"][r]["threadblocks"]}
    tbs = {(r, tb["id"]): tb["ops"] for r in range(n) for tb in plan["ranks"][r]["threadblocks"]}

    def span(rank, c):
        return bufs[rank][c["buffer"]], range(c["index"], c["index"] + c["size"])

    def step(r, tb, op):
        kind = op["op"]
        if kind == "barrier":
            came = at_barrier.setdefault((r, op["barrier"]), set())
            came.add(tb)
            return len(came) == len(op["threadblocks"])
        ch = channels[r].get(op.get("channel"))
        if kind == "wait":
            key = (ch["peer"], r, ch["type"], ch["tag"])
            if pending.get(key, 0) == 0:
                return False
            pending[key] -= 1
        elif kind == "signal":
            key = (r, ch["peer"], ch["type"], ch["tag"])
            pending[key] = pending.get(key, 0) + 1
        elif kind in ("put", "get", "copy", "put_packet"):
            src_rank = ch["peer"] if kind == "get" else r
            dst_rank = ch["peer"] if kind in ("put", "put_packet") else r
            (sb, si), (db, di) = span(src_rank, op["src"]), span(dst_rank, op["dst"])
            vals = [sb[i] for i in si]
            for i, v in zip(di, vals):
                db[i] = v
            if kind == "put_packet":
                arrived.update((ch["peer"], i) for i in di)
        elif kind == "switch_broadcast":
            sb, si = span(r, op["src"])
            vals = [sb[i] for i in si]
            for m in range(n):
                db, di = span(m, op["dst"])
                for i, v in zip(di, vals):
                    db[i] = v
        elif kind in ("reduce", "reduce_packet", "switch_reduce"):
            packets = op.get("packets", [])
            if any((r, i) not in arrived for c in packets for i in range(c["index"], c["index"] + c["size"])):
                return False
            db, di = span(r, op["dst"])
            if kind == "switch_reduce":  # the bound chunk of every rank, in rank order
                srcs = [span(m, op["src"]) for m in range(n)]
            else:
                srcs = [span(r, s) for s in op["srcs"] + packets]
            vals = []
            for k in range(len(di)):
                acc = None
                for sb, si in srcs:
                    x = sb[si[k]]
                    acc = x if acc is None else reduce(acc, x)
                vals.append(acc)
            for i, v in zip(di, vals):
                db[i] = v
        return True  # flush: nothing to model

    while True:
        moved, left = False, False
        for key, ops in tbs.items():
            while pcs[key] < len(ops) and step(key[0], key[1], ops[pcs[key]]):
                pcs[key] += 1
                moved = True
            left = left or pcs[key] < len(ops)
        if not left:
            return [b["output"] for b in bufs]
        if not moved:
            stuck = [f"rank {k[0]} thread block {k[1]} at operation {pcs[k]}" for k, o in tbs.items() if pcs[k] < len(o)]
            raise Deadlock("no thread block can move: " + "; ".join(stuck))
