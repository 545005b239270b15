"""The Communicator class: one per job (or per group of ranks)."""

from . import _plugboard
from .buffers import as_buffer

Error = _plugboard.Error

_OPS = ("sum", "prod", "min", "max", "avg")


def _op_name(op):
    name = str(op).lower()
    if name not in _OPS:
        raise ValueError(f"unknown reduction {op!r} (one of {', '.join(_OPS)})")
    return name


def _error(code, message):
    e = Error(message)
    e.code = code
    return e


class Communicator:
    """size processes joined at a unique id. Construction is collective:
    every rank calls it with the same id and size, and it returns once every
    rank has joined and connected (or raises Error naming who did not).

    timeout: seconds the join may take. settings: Plugboard settings by
    name ({"timeout": "30", "transports": "ethernet"}); they beat YAML
    and environment variables (PLUGBOARD_*), as in plugboard-info."""

    def __init__(self, rank, size, unique_id, timeout=60.0, settings=None):
        settings = {str(k): str(v) for k, v in (settings or {}).items()}
        self._native = _plugboard._Communicator(int(rank), int(size), bytes(unique_id), float(timeout), settings)

    @classmethod
    def from_env(cls, timeout=60.0, settings=None):
        """Rank, size and root from the launcher: torchrun (RANK,
        WORLD_SIZE, MASTER_ADDR, MASTER_PORT + 1), mpirun, Slurm, or
        PLUGBOARD_RANK / PLUGBOARD_NRANKS / PLUGBOARD_BOOTSTRAP_ADDR."""
        info = _plugboard.launch_info()
        uid = _plugboard.unique_id_from_address(info["root_address"], info["job_key"])
        return cls(info["rank"], info["size"], uid, timeout, settings)

    # -- identity and introspection --------------------------------------
    @property
    def rank(self):
        """This process's rank."""
        return self._comm().rank

    @property
    def size(self):
        """Number of ranks."""
        return self._comm().size

    def transport_for(self, peer):
        """Name of the transport carrying host buffers to peer."""
        return self._comm().transport_for(peer)

    def selection_reason(self, peer):
        """Why that transport was chosen for peer."""
        return self._comm().selection_reason(peer)

    def loaded_transports(self):
        """Transport plugins loaded on this rank."""
        return self._comm().loaded_transports()

    def host_of(self, rank):
        """Host identity of rank."""
        return self._comm().host_of(rank)

    def settings(self):
        """Every setting by name: value, default, source, origin and doc."""
        return {s["name"]: s for s in self._comm().settings()}

    # -- collectives (host memory) ----------------------------------------
    def all_reduce(self, send, recv=None, op="sum"):
        """recv = op over ranks of send, element-wise (recv=None: in place).
        Returns recv."""
        recv = send if recv is None else recv
        self._comm().all_reduce(as_buffer(send, "send", reducing=True),
                                as_buffer(recv, "recv", writable=True, reducing=True), _op_name(op))
        return recv

    def all_gather(self, send, recv):
        """recv = every rank's send, concatenated by rank. Returns recv."""
        self._comm().all_gather(as_buffer(send, "send"), as_buffer(recv, "recv", writable=True))
        return recv

    def reduce_scatter(self, send, recv, op="sum"):
        """recv = block `rank` of op over ranks of send (size blocks of
        len(recv)). Returns recv."""
        self._comm().reduce_scatter(as_buffer(send, "send", reducing=True),
                                    as_buffer(recv, "recv", writable=True, reducing=True), _op_name(op))
        return recv

    def broadcast(self, buf, root=0):
        """buf on every rank = buf on root. Returns buf."""
        b = as_buffer(buf, "buf", writable=True)
        self._comm().broadcast(b, b, int(root))
        return buf

    def reduce(self, send, recv=None, op="sum", root=0):
        """recv on root = op over ranks of send (recv=None: in place; recv
        is written on root only). Returns recv."""
        recv = send if recv is None else recv
        self._comm().reduce(as_buffer(send, "send", reducing=True),
                            as_buffer(recv, "recv", writable=True, reducing=True), _op_name(op), int(root))
        return recv

    def all_to_all(self, send, recv):
        """Block j of send goes to rank j; block i of recv comes from rank i
        (size equal blocks). Returns recv."""
        self._comm().all_to_all(as_buffer(send, "send"), as_buffer(recv, "recv", writable=True))
        return recv

    def send(self, buf, peer):
        """Sends buf to peer, which receives it with recv."""
        self._comm().send(as_buffer(buf, "buf"), int(peer))

    def recv(self, buf, peer):
        """Receives into buf what peer sent. Returns buf."""
        self._comm().recv(as_buffer(buf, "buf", writable=True), int(peer))
        return buf

    def send_recv(self, send, send_peer, recv, recv_peer):
        """Sends send to send_peer while receiving recv from recv_peer (the
        two may differ in length). Returns recv."""
        self._comm().send_recv(as_buffer(send, "send"), int(send_peer),
                               as_buffer(recv, "recv", writable=True), int(recv_peer))
        return recv

    def barrier(self):
        """Returns once every rank has called barrier()."""
        self._comm().barrier()

    # -- errors and lifetime ---------------------------------------------
    def abort(self):
        """Ends every call blocked in this communicator (any thread) with
        Error(code "aborted"); later calls fail the same way. Local."""
        self._comm().abort()

    @property
    def aborted(self):
        """True once abort() was called."""
        return self._comm().aborted()

    def async_error(self):
        """The error a background thread or a peer left without a call
        having raised it yet (ncclCommGetAsyncError), or None. Never blocks."""
        err = self._comm().async_error()
        return None if err is None else _error(err[0], err[1])

    def report_failure(self, reason):
        """Tells every peer that this rank gives up on the communicator and
        why: their waits on it (collectives, checks) end within milliseconds
        raising an Error (code "remote error") that names this rank and reason,
        not at their timeout. Only the first call sends. Never raises."""
        self._comm().report_failure(str(reason))

    def peer_failure(self):
        """The failure a peer reported (report_failure) as an Error, kept
        once read, or None. Never waits on a peer."""
        err = self._comm().peer_failure()
        return None if err is None else _error(err[0], err[1])

    def close(self):
        """Destroys the communicator now (local; no collective step)."""
        self._native = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _comm(self):
        if self._native is None:
            raise _error("invalid usage", "this communicator was closed")
        return self._native

