"""A torch.distributed backend named "plugboard" for CPU tensors, on
Plugboard's host collectives.

    import torch.distributed as dist
    import plugboard.torch_backend            # registers "plugboard"
    dist.init_process_group("plugboard")      # torchrun's environment

(Installed with pip, the package also registers it through the
torch.distributed.backends entry point, so the import is optional.)

Every call runs to completion before it returns: the Work it returns is
already done, async_op=True included. Errors are plugboard.Error raised at
the call. The process group's timeout bounds the join and, unless
PLUGBOARD_TIMEOUT is set, every wait inside Plugboard. Send/recv tags are
accepted but not used: messages between two ranks arrive in order.
"""

from datetime import timedelta
import os

import torch
import torch.distributed as dist

from . import _plugboard
from .communicator import Communicator

BACKEND_NAME = "plugboard"
_UNIQUE_ID_KEY = "plugboard/unique_id"

_REDUCE_OPS = (
    (dist.ReduceOp.SUM, "sum"),
    (dist.ReduceOp.PRODUCT, "prod"),
    (dist.ReduceOp.MIN, "min"),
    (dist.ReduceOp.MAX, "max"),
    (dist.ReduceOp.AVG, "avg"),
)


def _op_name(reduce_op):
    for torch_op, name in _REDUCE_OPS:
        if reduce_op == torch_op:
            return name
    raise ValueError(f"the plugboard backend does not do {reduce_op} (it does sum, product, min, max, avg)")


class _DoneWork(dist._Work):
    """A Work that was complete when it was made; its future holds result."""

    def __init__(self, result):
        super().__init__()
        self._result = result
        self._future = None  # made when asked for (DDP does; most callers do not)

    def wait(self, timeout=timedelta(0)):
        return True

    def is_completed(self):
        return True

    def is_success(self):
        return True

    def result(self):
        return self._result

    def get_future(self):
        if self._future is None:
            self._future = torch.futures.Future()
            self._future.set_result(self._result)
        return self._future


def _contiguous_out(t):
    """A contiguous tensor to receive into for t (t itself when it is)."""
    return t if t.is_contiguous() else torch.empty_like(t, memory_format=torch.contiguous_format)


class ProcessGroupPlugboard(dist.ProcessGroup):
    """torch.distributed's collectives on a plugboard.Communicator."""

    def __init__(self, comm, rank, size):
        super().__init__(rank, size)
        self._comm = comm

    @property
    def communicator(self):
        """The plugboard.Communicator underneath."""
        return self._comm

    def getBackendName(self):
        return BACKEND_NAME

    # -- reductions ------------------------------------------------------
    def allreduce(self, tensors, opts=None):
        op = _op_name(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        for t in tensors:
            self._in_place(t, lambda buf: self._comm.all_reduce(buf, op=op))
        return _DoneWork(tensors)

    def allreduce_coalesced(self, tensors, opts=None):
        return self.allreduce(tensors, opts)

    def reduce(self, tensors, opts):
        op = _op_name(opts.reduceOp)
        for t in tensors:
            self._in_place(t, lambda buf: self._comm.reduce(buf, op=op, root=opts.rootRank))
        return _DoneWork(tensors)

    def reduce_scatter(self, outputs, input_lists, opts):
        op = _op_name(opts.reduceOp)
        for out, inputs in zip(outputs, input_lists):
            flat = torch.cat([t.reshape(-1) for t in inputs])
            self._into(out, lambda o: self._comm.reduce_scatter(flat, o.reshape(-1), op))
        return _DoneWork(outputs)

    def reduce_scatter_single(self, output, input, opts):
        op = _op_name(opts.reduceOp)
        self._into(output, lambda o: self._comm.reduce_scatter(input.contiguous().reshape(-1), o.reshape(-1), op))
        return _DoneWork([output])

    _reduce_scatter_base = reduce_scatter_single

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts):
        for out, inp in zip(outputs, inputs):
            self.reduce_scatter_single(out, inp, opts)
        return _DoneWork(outputs)

    # -- data movement ---------------------------------------------------
    def broadcast(self, tensors, opts):
        for t in tensors:
            self._in_place(t, lambda buf: self._comm.broadcast(buf, opts.rootRank))
        return _DoneWork(tensors)

    def allgather(self, output_lists, inputs, opts=None):
        for outs, inp in zip(output_lists, inputs):
            flat = torch.empty((self.size(),) + tuple(inp.shape), dtype=inp.dtype)
            self._comm.all_gather(inp.contiguous(), flat)
            for r, out in enumerate(outs):
                out.copy_(flat[r])
        return _DoneWork(output_lists)

    def all_gather_single(self, output, input, opts=None):
        self._into(output, lambda o: self._comm.all_gather(input.contiguous(), o))
        return _DoneWork([output])

    _allgather_base = all_gather_single

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        for out, inp in zip(outputs, inputs):
            self.all_gather_single(out, inp, opts)
        return _DoneWork(outputs)

    def gather(self, output_lists, inputs, opts):
        root = opts.rootRank
        for i, inp in enumerate(inputs):
            src = inp.contiguous()
            if self.rank() != root:
                self._comm.send(src, root)
                continue
            for r, out in enumerate(output_lists[i]):
                if r == root:
                    out.copy_(src)
                else:
                    self._into(out, lambda o: self._comm.recv(o, r))
        return _DoneWork(output_lists)

    def scatter(self, outputs, input_lists, opts):
        root = opts.rootRank
        for i, out in enumerate(outputs):
            if self.rank() != root:
                self._into(out, lambda o: self._comm.recv(o, root))
                continue
            for r, inp in enumerate(input_lists[i]):
                if r == root:
                    out.copy_(inp)
                else:
                    self._comm.send(inp.contiguous(), r)
        return _DoneWork(outputs)

    def alltoall(self, outputs, inputs, opts=None):
        if all(o.numel() == outputs[0].numel() for o in outputs) and \
                all(i.numel() == inputs[0].numel() for i in inputs) and outputs[0].numel() == inputs[0].numel():
            send = torch.cat([t.reshape(-1) for t in inputs])
            recv = torch.empty_like(send)
            self._comm.all_to_all(send, recv)
            for r, out in enumerate(outputs):
                out.copy_(recv.view(self.size(), -1)[r].view_as(out))
        else:
            self._pairwise([t.contiguous() for t in inputs], outputs)
        return _DoneWork(outputs)

    def all_to_all_single(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        src = input.contiguous()
        if not output_split_sizes and not input_split_sizes:
            self._into(output, lambda o: self._comm.all_to_all(src, o))
        else:
            outs = list(output.split(output_split_sizes or output.shape[0] // self.size()))
            self._pairwise(list(src.split(input_split_sizes or src.shape[0] // self.size())), outs)
        return _DoneWork([output])

    alltoall_base = all_to_all_single

    def barrier(self, opts=None):
        self._comm.barrier()
        return _DoneWork([])

    def send(self, tensors, dst, tag=0):
        for t in tensors:
            self._comm.send(t.contiguous(), dst)
        return _DoneWork(tensors)

    def recv(self, tensors, src, tag=0):
        for t in tensors:
            self._into(t, lambda o: self._comm.recv(o, src))
        return _DoneWork(tensors)

    def recv_anysource(self, tensors, tag=0):
        raise ValueError("the plugboard backend does not receive from any source: name the sender")

    # -- helpers ---------------------------------------------------------
    def _pairwise(self, sends, outs):
        """Block r of sends to rank r, block r of outs from rank r, in
        size - 1 exchange steps (blocks may differ in length)."""
        me, n = self.rank(), self.size()
        outs[me].copy_(sends[me])
        for step in range(1, n):
            to, frm = (me + step) % n, (me - step) % n
            self._into(outs[frm], lambda o: self._comm.send_recv(sends[to], to, o, frm))

    @staticmethod
    def _into(t, fill):
        """Runs fill on a contiguous tensor holding t's place; copies back
        into t when t itself is not contiguous."""
        out = _contiguous_out(t)
        fill(out)
        if out is not t:
            t.copy_(out)

    @staticmethod
    def _in_place(t, call):
        """call(buf) for an in-place collective on t, buf being t or, when
        t is not contiguous, a contiguous copy written back after."""
        if t.is_contiguous():
            call(t)
        else:
            buf = t.contiguous()
            call(buf)
            t.copy_(buf)


def _create(store, rank, size, timeout):
    """torch.distributed's creator: rank 0 makes the unique id and shares it
    through the group's store (keys are per group, so several groups work)."""
    if rank == 0:
        store.set(_UNIQUE_ID_KEY, _plugboard.create_unique_id())
    unique_id = store.get(_UNIQUE_ID_KEY)
    seconds = timeout.total_seconds() if timeout is not None else 600.0
    settings = {} if os.environ.get("PLUGBOARD_TIMEOUT") else {"timeout": str(seconds)}
    return ProcessGroupPlugboard(Communicator(rank, size, unique_id, seconds, settings), rank, size)


def register():
    """Registers the "plugboard" backend with torch.distributed (idempotent)."""
    if BACKEND_NAME.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(BACKEND_NAME, _create, devices=["cpu"])


register()
