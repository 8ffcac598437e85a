"""Options declared once: validation, factory signature, design parameters, listing, YAML."""

from __future__ import annotations

import dataclasses
import inspect
import textwrap

import numpy as np
import pytest

from codesign import DesignError
from codesign.cli import main
from codesign.config import ConfigError, parse_config
from codesign.experiment import build_experiment
from codesign.options import (
    Options,
    OptionsError,
    check_options,
    format_options,
    option,
    options_factory,
)
from codesign.plugins import get_registry
from codesign.validation import validate_config

from .test_config import BASE, fx


@dataclasses.dataclass(frozen=True, kw_only=True)
class ArmOptions(Options):
    links: int = option(2, lower=1, doc="number of links")
    stiffness: float | list[float] = option(3.0, unit="N m/rad", lower=0.0, upper=100.0,
                                            doc="joint stiffness")
    solver: str = option("direct", choices=("direct", "iterative"), doc="linear solver")
    offsets: list[float] = option([0.0, 0.0], unit="m", doc="base offsets")


@options_factory(ArmOptions)
def make_arm(options: ArmOptions) -> ArmOptions:
    """Returns its options (the builder of a real simulator would build one)."""
    return options


def test_declaration_gives_defaults_specs_and_fresh_mutable_defaults():
    first, second = ArmOptions(), ArmOptions()
    assert first.links == 2 and first.solver == "direct"
    assert first.offsets == [0.0, 0.0] and first.offsets is not second.offsets
    spec = ArmOptions.spec("stiffness")
    assert (spec.unit, spec.lower, spec.upper, spec.doc) == ("N m/rad", 0.0, 100.0,
                                                             "joint stiffness")
    assert [s.name for s in ArmOptions.specs()] == ["links", "stiffness", "solver", "offsets"]
    with pytest.raises(KeyError, match="no option 'length'"):
        ArmOptions.spec("length")


@pytest.mark.parametrize("values, message", [
    ({"links": 0}, "'links': 0 lies outside its physical bounds >= 1"),
    ({"stiffness": [1.0, -2.0]}, r"'stiffness': -2 N m/rad lies outside .* \[0, 100\]"),
    ({"stiffness": float("nan")}, "'stiffness': nan is not finite"),
    ({"solver": "cg"}, "'solver': 'cg' is not one of its choices: 'direct', 'iterative'"),
])
def test_values_outside_bounds_or_choices_raise_naming_the_option(values, message):
    with pytest.raises(OptionsError, match=message):
        ArmOptions(**values)


def test_problems_checks_only_the_declared_values_given():
    assert ArmOptions.problems({"links": 3, "stiffness": 200.0, "unknown": -1}) == [
        ("stiffness", "200 N m/rad lies outside its physical bounds [0, 100] N m/rad")]
    assert ArmOptions.problems({}) == []


def test_factory_signature_is_the_declaration():
    parameters = inspect.signature(make_arm).parameters
    assert list(parameters) == ["links", "stiffness", "solver", "offsets"]
    assert all(p.kind is p.KEYWORD_ONLY for p in parameters.values())
    assert parameters["links"].default == 2
    assert make_arm(links=3) == ArmOptions(links=3)
    assert make_arm.options is ArmOptions


def test_design_parameter_takes_unit_bounds_and_doc_from_the_option():
    parameter = ArmOptions.parameter("stiffness", name="joint.stiffness", shape=(3,),
                                     default=np.array([1.0, 2.0, 3.0]), scale=2.0,
                                     entity="joint")
    assert (parameter.lower, parameter.upper, parameter.unit) == (0.0, 100.0, "N m/rad")
    assert parameter.doc == "joint stiffness" and parameter.shape == (3,)
    np.testing.assert_array_equal(parameter.default_array(), [1.0, 2.0, 3.0])
    unbounded = ArmOptions.parameter("offsets", name="base.offset", shape=(2,), default=0.0,
                                     scale=1.0, doc="one offset")
    assert unbounded.lower == -np.inf and unbounded.doc == "one offset"


def test_listing_names_unit_default_bounds_and_doc():
    lines = format_options(ArmOptions).splitlines()
    assert lines[0].split() == ["option", "unit", "default", "bounds", "doc"]
    assert lines[2].split()[:5] == ["stiffness", "N", "m/rad", "3.0", "[0,"]
    assert "one of direct, iterative" in lines[3]


def test_check_options_reports_bounds_with_the_option_path_and_resolves_defaults():
    resolved, problems = check_options(make_arm, {"links": 2, "stiffness": -1.0}, what="arm")
    assert problems == [(("stiffness",), "option 'stiffness' of arm: -1 N m/rad lies "
                                          "outside its physical bounds [0, 100] N m/rad")]
    resolved, problems = check_options(make_arm, {"links": 4}, what="arm")
    assert problems == []
    assert resolved == {"links": 4, "stiffness": 3.0, "solver": "direct", "offsets": [0.0, 0.0]}
    _, problems = check_options(make_arm, {"link": 4}, what="arm")
    assert "unknown option 'link' for arm (did you mean 'links'?)" in problems[0][1]


def _validated(text: str):
    return validate_config(parse_config(textwrap.dedent(text)), get_registry(fx.plugin_manager()))


def test_yaml_option_outside_its_bounds_is_a_located_config_error():
    text = BASE.replace("  name: spring\n", "  name: spring\n  options: {q0: 5.0}\n")
    with pytest.raises(ConfigError, match=r"simulator.options.q0 \(line 3\): option 'q0' of "
                                          r"simulator 'spring': 5 m lies outside"):
        _validated(text)


@pytest.mark.parametrize("bounds, message", [
    ("lower: -1.0", "lower bound -1.0 lies below the parameter's physical bound 0.0"),
    ("upper: 500.0", "upper bound 500.0 lies above the parameter's physical bound 100.0"),
])
def test_design_section_may_narrow_bounds_but_never_widen_them(bounds, message):
    text = BASE.replace("lower: 0.5, upper: 20.0", bounds)
    with pytest.raises(DesignError, match=message):
        build_experiment(_validated(text), get_registry(fx.plugin_manager()))


def test_cli_lists_a_simulators_options(capsys):
    assert main(["options", "spring"], plugin_manager=fx.plugin_manager()) == 0
    out = capsys.readouterr().out
    assert "q0" in out and "[-2, 2]" in out and "start position" in out
    assert main(["options", "linear"], plugin_manager=fx.plugin_manager()) == 2
    assert "does not declare its options" in capsys.readouterr().err
