"""Every numba-cached function calls only compiled code of its own source file.

numba's on-disk cache checks the source file of the function it caches, not those of its
callees: a cached function calling another file's compiled function (or inlining it, or
one of its intrinsics) keeps running the callee's old machine code after an edit.
"""

import importlib
import inspect
import types
from pathlib import Path

import pytest
from numba.core.caching import NullCache
from numba.core.extending import _Intrinsic
from numba.core.registry import CPUDispatcher

SOURCES = sorted((Path(__file__).resolve().parents[1] / "packages").glob("*/src/*"))


def compiled_modules():
    """Names of the workspace's modules that use numba."""
    for root in SOURCES:
        for path in sorted(root.rglob("*.py")):
            if "numba" in path.read_text(encoding="utf-8"):
                parts = path.relative_to(root.parent).with_suffix("").parts
                yield ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def cached_dispatchers(module):
    """The module's cached dispatchers: globals, attributes of its global objects, and the
    builds of those that make them (``sim_mpm._particle_kernels.Kernel``)."""
    found = []
    for value in vars(module).values():
        candidates = [value] if isinstance(value, CPUDispatcher) else [
            v for v in getattr(value, "__dict__", {}).values()
            if isinstance(v, CPUDispatcher) and not isinstance(value, type)]
        if callable(getattr(value, "builds", None)) and not isinstance(value, type):
            candidates += value.builds()
        found += [d for d in candidates if not isinstance(d._cache, NullCache)
                  and d.py_func.__module__ == module.__name__]
    return found


def names_used(code: types.CodeType):
    """Every name a function's code (nested functions included) loads."""
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from names_used(const)


def compiled_callees(dispatcher, seen=None):
    """(name, defining module) of every compiled function or intrinsic the dispatcher's
    Python function refers to, directly or as an attribute of a module it refers to, and
    those of the compiled functions it calls (a build can call code compiled for it alone)."""
    seen = set() if seen is None else seen
    seen.add(id(dispatcher))
    fn = dispatcher.py_func
    names = set(names_used(fn.__code__))
    for name in names:
        value = fn.__globals__.get(name)
        values = ([getattr(value, attr) for attr in names if hasattr(value, attr)]
                  if inspect.ismodule(value) else [value])
        for callee in values:
            if isinstance(callee, CPUDispatcher):
                yield name, callee.py_func.__module__
                if id(callee) not in seen:
                    yield from compiled_callees(callee, seen)
            elif isinstance(callee, _Intrinsic):
                yield name, callee._defn.__module__


MODULES = list(compiled_modules())


def test_the_scan_finds_the_kernels():
    assert {"sim_mpm._particle_kernels", "sim_mpm._grid_kernels", "sim_vine._kernels",
            "sim_vine.kkt"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_cached_functions_call_only_compiled_code_of_their_own_file(name):
    module = importlib.import_module(name)
    foreign = [(d.py_func.__qualname__, callee, home)
               for d in cached_dispatchers(module)
               for callee, home in compiled_callees(d) if home != name]
    assert not foreign, f"cached functions of {name} call compiled code of other files: " \
        f"{foreign}"
