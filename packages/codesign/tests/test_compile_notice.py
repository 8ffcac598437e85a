"""The compile notice: said once per process, for the named package's functions only."""

import types

from codesign.compile_notice import CompileNotice, announce_compiles


def _event(module: str):
    return types.SimpleNamespace(
        data={"dispatcher": types.SimpleNamespace(py_func=types.SimpleNamespace(
            __module__=module))})


def test_the_notice_is_said_once_and_only_for_its_package(capsys):
    notice = CompileNotice("sim_x.", "sim_x: compiling")
    notice.on_start(_event("sim_y.kernels"))
    notice.on_start(types.SimpleNamespace(data=None))  # an event without a dispatcher
    assert "compiling" not in capsys.readouterr().err
    for _ in range(2):
        notice.on_start(_event("sim_x._kernels"))
    assert capsys.readouterr().err.count("sim_x: compiling") == 1


def test_a_registered_notice_hears_numba_compile(capsys):
    import numba

    notice = announce_compiles(__name__, "tests: compiling")
    numba.njit(lambda x: x + 1)(1)  # defined in this module, compiled now
    assert notice.said
    assert capsys.readouterr().err.count("tests: compiling") == 1
