"""A line on stderr while a package's numba kernels compile: the first run of a simulator
spends seconds compiling (cached on disk afterwards), which would otherwise look like a hang.

numba fires its ``numba:compile`` event only when its disk cache misses, so a warm cache
stays quiet. The line goes through ``tqdm.write``, which keeps a progress bar that is
running (the first optimizer iteration's) below it instead of splitting it. numba is
imported here only when a package asks, so the core does not depend on it.
"""

from __future__ import annotations

import sys

from tqdm import tqdm

__all__ = ["CompileNotice", "announce_compiles"]


class CompileNotice:
    """Writes ``message`` once per process when a function of ``package`` (a module name
    prefix, e.g. ``"sim_pbd."``) starts compiling: a numba event listener."""

    def __init__(self, package: str, message: str):
        self.package, self.message = package, message
        self.said = False

    def on_start(self, ev):
        """numba's compile-start event: say the message the first time it is ours."""
        dispatcher = (ev.data or {}).get("dispatcher")
        # functions made by exec have no module
        module = getattr(getattr(dispatcher, "py_func", None), "__module__", None) or ""
        if not self.said and module.startswith(self.package):
            self.said = True
            tqdm.write(self.message, file=sys.stderr)

    def on_end(self, ev):
        """numba's compile-end event: nothing to do."""


def announce_compiles(package: str, message: str) -> CompileNotice:
    """Register a :class:`CompileNotice` for ``package`` with numba; returns it."""
    from numba.core import event

    notice = CompileNotice(package, message)

    class _Listener(event.Listener):
        def on_start(self, ev):
            notice.on_start(ev)

        def on_end(self, ev):
            notice.on_end(ev)

    event.register("numba:compile", _Listener())
    return notice
