"""Helpers the Python benchmarks share (bench/torch_cpu.py, bench/torch_nccl_sweep.py)."""
import socket


def parse_bytes(text):
    """'8', '64K', '16M', '1G' (powers of 1024) as bytes."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def free_port():
    """A TCP port free on 127.0.0.1 now, for a job's rendezvous."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
