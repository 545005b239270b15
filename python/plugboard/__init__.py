"""Plugboard from Python: a communicator and host collectives on NumPy
arrays and any buffer-protocol object (torch CPU tensors too), and GPU
collectives on CUDA tensors and __cuda_array_interface__ objects
(GpuCollectives, where the package was built with CUDA).

    import numpy as np, plugboard
    comm = plugboard.Communicator.from_env()      # torchrun / mpirun / Slurm
    x = np.ones(1024, dtype=np.float32)
    comm.all_reduce(x)                            # in place, sum

Every call blocks until this rank's part is done, releases the GIL while it
waits, and raises plugboard.Error (a RuntimeError whose .code is "timeout",
"remote", "aborted", ...) with a message naming the rank, peer, host and
transport. Calls must be made in the same order on every rank.
"""

from ._plugboard import Error, create_unique_id, default_settings, launch_info, unique_id_from_address
from .buffers import as_buffer
from .communicator import Communicator
from .gpu import GpuCollectives, as_cuda_buffer

__all__ = [
    "Communicator",
    "Error",
    "GpuCollectives",
    "as_cuda_buffer",
    "as_buffer",
    "create_unique_id",
    "default_settings",
    "launch_info",
    "unique_id_from_address",
]
