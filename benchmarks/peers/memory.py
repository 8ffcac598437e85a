"""Peak memory of a benchmark's fresh process, shared by the benchmarks' memory sweeps."""

from __future__ import annotations

import resource

__all__ = ["peak_rss_mib"]


def peak_rss_mib() -> float:
    """This process's peak resident set size [MiB]: Linux's VmHWM, which exec resets (the
    maximum RSS of getrusage keeps the forking parent's: the benchmark that started the
    sweep, peers loaded); getrusage where /proc is missing."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux
