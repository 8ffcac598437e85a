"""Finger Reach, Flip Box and Rotate Rubik's Cube episode speed: sim_rigid's forward and adjoint
against MuJoCo's forward and finite differences through it, side by side in one run (issue 15,
"What it must show"); then the Flip Box and Rubik's cube episodes, contact included.

Scene: the example ``finger_reach.yaml`` of sim_rigid (a 4-phalanx finger on a wall, four
revolute joints about y, gravity, joint damping 0.05 N m s/rad, no contact), the paper's
episode: 600 steps of Δt = 5 ms, 30 open-loop torque rows held 20 steps each, the example's
loss (200 Σ‖a‖² + 200 Σ‖p − p̂‖ at the control steps). The controls: uniform in ±0.1 N m
(``--seed``). It

1. writes an MJCF of the same model (``mjcf``: the links' masses, centres of mass and
   inertia tensors, the joint frames, axes and damping, a site at the fingertip, one motor
   per joint, contact off) and checks that MuJoCo's trajectory under the same torques agrees
   with sim_rigid's: the largest joint-angle difference over the episode, both at Δt = 5 ms
   and both at 0.5 ms (MuJoCo's ``implicit`` integrator, damping implicit; BDF2 and MuJoCo's
   Euler-type step have different step errors), sim_rigid's own step error (5 against
   0.5 ms), and the two losses;
2. times (median of ``--rounds``, one process, float64): sim_rigid's forward; forward +
   backward (√N checkpointed reverse sweep of ``codesign.Rollout``) with the controls
   free; forward + backward with the controls and every simulation parameter free (the
   242 of the finger's design space: masses, centres of mass, inertias, joint origins and
   axes, damping, contact points, areas and coefficients); MuJoCo's forward (the loss
   computed as ours); and forward finite differences through MuJoCo for as many
   parameters as the full gradient (N + 1 episodes, run here, each with one control entry
   perturbed: a parameter's episode costs the same), then prints the ratios and the
   anchors from the issue (the authors' C++ code: reach forward 0.43–0.53 s, forward +
   backward with design gradients 1.2–1.5 s) and the target (gradients ≥ 20× faster than
   finite differences through MuJoCo);
3. compares the adjoint's control gradient with central differences through sim_rigid
   (a few entries) and with forward differences through MuJoCo (cosine), as a sanity check
   of what the finite-difference peer computes;
4. the gradient peer: the same episode's loss and its gradient with respect to the controls
   and the model's masses, inertias, body positions and joint damping through MuJoCo XLA
   (``peers/mjx_reach.py``: JAX reverse mode through ``lax.scan`` of ``mjx.step``, float64,
   MJX's ``implicitfast`` integrator), timed after its compilation (reported apart), with
   its control gradient's cosine against the finite differences through MuJoCo.

MuJoCo and MJX run when importable: ``pip install ./packages/codesign
'./packages/sim_rigid[benchmark]'``.

Flip Box (``flip_box.yaml``: a 4-phalanx finger on an x-z carriage, a 216 g box on an
unactuated hinge, contact of the finger's 30 pad points with the box and the floor and of the
box's two corners with the floor; 150 steps of Δt = 5 ms, 30 control rows of 6 held 5 steps
each, the example's loss): the controls are :func:`flip_table`, a hand-made motion that
reaches over the box, hooks its back face and pulls it over (the box turns past 90°, so the
episode is in contact most of the time). Timed as the reach: forward, forward + backward
with the controls free, and with the controls and every simulation parameter free; the
anchors are the authors' (flip forward 0.22 s, forward + backward 1.9–3.4 s). MuJoCo has no
peer of this scene here (its contact model is not the paper's penalty law).

Rotate Rubik's Cube (``rubik_rotate.yaml``: a 3-phalanx finger on an x-y carriage that turns
about z, a cube whose top layer turns on an unactuated joint, contact of the finger's pad
points with the layer, the cube's welded block and the floor; 200 steps of Δt = 5 ms, 40
control rows of 6 held 5 steps each, the example's loss): the controls are
:func:`rotate_table`, a hand-made motion that curls the finger down onto the layer and drags
it round sideways. Timed as Flip Box; the issue gives no anchor for it.

Assemble (``assemble.yaml``: two fingers on a sliding hand, a small box and a movable mount,
46 contact points against 6 shapes; 500 steps of Δt = 1 ms, 100 control rows of 8 held 5
steps each, the example's loss): its start, zero controls (the right finger sags onto the
box), timed as Flip Box (``--tasks assemble``; not in the default set, it takes longest);
the issue gives no anchor for it.

Usage: ``python benchmarks/rigid_step.py [--rounds 3] [--seed 0] [--tasks reach flip rotate
assemble]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

import sim_rigid
from codesign.config import load_config
from codesign.experiment import build_experiment
from codesign.plugins import get_registry
from codesign.problem import RolloutProblem
from codesign.validation import validate_config
from sim_rigid.model import JOINT_TYPES

EXAMPLE = Path(sim_rigid.__file__).parent / "examples" / "finger_reach.yaml"
FLIP_EXAMPLE = EXAMPLE.with_name("flip_box.yaml")
ROTATE_EXAMPLE = EXAMPLE.with_name("rubik_rotate.yaml")
ASSEMBLE_EXAMPLE = EXAMPLE.with_name("assemble.yaml")
CPP_FORWARD_S = (0.43, 0.53)
CPP_BACKWARD_S = (1.2, 1.5)
CPP_FLIP_FORWARD_S = 0.22
CPP_FLIP_BACKWARD_S = (1.9, 3.4)
TARGET_FD_RATIO = 20.0


def median_time(fn, rounds: int) -> float:
    """Median wall time [s] of ``rounds`` calls of ``fn``."""
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def _numbers(values) -> str:
    """MJCF's space-separated numbers, at full precision."""
    return " ".join(repr(float(v)) for v in np.ravel(values))


def mjcf(model, *, dt: float, tip_link: int, tip_point) -> str:
    """MJCF of a sim_rigid model of revolute, prismatic and fixed joints: nested bodies at
    the joint origins and rotations, explicit inertials, joint damping, a ``tip`` site at
    ``tip_point`` [m] on link ``tip_link``, one motor per 1-DOF joint, contact off."""
    import mujoco

    root = ET.Element("mujoco", model="finger")
    ET.SubElement(root, "compiler", angle="radian")
    option = ET.SubElement(root, "option", timestep=repr(dt), integrator="implicit",
                           gravity=_numbers(model.gravity))
    ET.SubElement(option, "flag", contact="disable")
    world = ET.SubElement(root, "worldbody")
    actuator = ET.SubElement(root, "actuator")
    bodies = {}
    for i, name in enumerate(model.link_names):
        kind = JOINT_TYPES[model.joint_type[i]]
        if kind == "free":
            raise ValueError("mjcf: free joints are not written (the finger has none)")
        quat = np.zeros(4)
        mujoco.mju_mat2Quat(quat, np.ascontiguousarray(model.joint_rotation[i]).ravel())
        parent = world if model.joint_parent[i] < 0 else bodies[model.joint_parent[i]]
        body = ET.SubElement(parent, "body", name=name,
                             pos=_numbers(model.joint_origin[i]), quat=_numbers(quat))
        inertia = model.link_inertia[i]
        ET.SubElement(body, "inertial", pos=_numbers(model.link_com[i]),
                      mass=repr(float(model.link_mass[i])),
                      fullinertia=_numbers([inertia[a, b] for a, b in
                                                ((0, 0), (1, 1), (2, 2), (0, 1), (0, 2),
                                                 (1, 2))]))
        if kind in ("revolute", "prismatic"):
            coordinate = int(model.joint_first[i])
            ET.SubElement(body, "joint", name=f"{name}_joint",
                          type="hinge" if kind == "revolute" else "slide",
                          axis=_numbers(model.joint_axis[i]),
                          damping=repr(float(model.joint_damping[coordinate])))
            ET.SubElement(actuator, "motor", joint=f"{name}_joint", gear="1")
        if i == tip_link:
            ET.SubElement(body, "site", name="tip", pos=_numbers(tip_point))
        bodies[i] = body
    return ET.tostring(root, encoding="unicode")


class MujocoEpisode:
    """The reach episode in MuJoCo: the joint angles after every step and the example's
    loss from the fingertip site at the control steps."""

    def __init__(self, model, term, *, dt: float, substeps: int, weights: tuple, refine=1):
        import mujoco

        self.mujoco = mujoco
        self.m = mujoco.MjModel.from_xml_string(mjcf(model, dt=dt / refine, tip_link=term.link,
                                                     tip_point=term.point))
        self.d = mujoco.MjData(self.m)
        self.rest, self.term = np.asarray(model.joint_rest), term
        self.substeps, self.refine, self.weights = substeps, refine, weights
        self.site = self.m.site("tip").id

    def run(self, table, *, record: bool = False):
        """(loss, joint angles after every step (steps × substeps, d) when ``record``)."""
        mj, m, d = self.mujoco, self.m, self.d
        mj.mj_resetData(m, d)
        d.qpos[:] = self.rest
        mj.mj_forward(m, d)
        action_weight, reach_weight = self.weights
        loss, angles = 0.0, []
        for c, row in enumerate(table):
            loss += action_weight * float(row @ row)
            if c > 0:
                loss += reach_weight * self._distance(c)
            d.ctrl[:] = row
            for _ in range(self.substeps):
                for _ in range(self.refine):
                    mj.mj_step(m, d)
                if record:
                    angles.append(d.qpos.copy())
        loss += reach_weight * self._distance(len(table))
        return loss, (np.array(angles) if record else None)

    def _distance(self, control_step: int) -> float:
        self.mujoco.mj_kinematics(self.m, self.d)
        time_s = control_step * self.term.control_dt
        return float(np.linalg.norm(self.d.site_xpos[self.site] - self.term.target(time_s)))


def flip_table(steps: int, control_dt: float) -> np.ndarray:
    """Flip Box controls (steps, 6) in [-1, 1] (slide x, slide z, the four finger joints):
    0-0.15 s forward, up and curling to reach past the box's back face; 0.15-0.3 s down,
    curling the tip behind it; then back (slide x at -1), pulling the box over."""
    table = np.zeros((steps, 6))
    for k in range(steps):
        time_s = k * control_dt
        if time_s < 0.15:
            table[k] = [0.6, 0.25, 0.6, 0.0, 0.0, 0.0]
        elif time_s < 0.3:
            table[k] = [0.0, -0.1, 0.5, 0.5, 0.3, 0.3]
        else:
            table[k] = [-1.0, 0.2, 0.5, 0.5, 0.3, 0.3]
    return table


def rotate_table(steps: int, control_dt: float) -> np.ndarray:
    """Rotate Rubik's Cube controls (steps, 6) in [-1, 1] (slide x, slide y, the carriage's
    turn, the three finger joints): 0-0.25 s back and curling down onto the layer's top
    face; then sideways (slide y at -0.5), still pressing (phalanx 1 at 1), the pad dragging
    the layer round by friction."""
    table = np.zeros((steps, 6))
    for k in range(steps):
        if k * control_dt < 0.25:
            table[k] = [-0.3, 0.0, 0.0, 1.0, 0.3, 0.0]
        else:
            table[k] = [0.0, -0.5, 0.0, 1.0, 0.0, 0.0]
    return table


def contact_episode(registry, rounds: int, *, title: str, example: Path, table, joint: str,
                    anchors: tuple[float, tuple[float, float]] | None) -> None:
    """Time a contact task's episode (Flip Box, Rotate Rubik's Cube, Assemble: see the
    module docstring) under the controls ``table(steps, control_dt)`` and print the rows,
    the coordinate of the 1-DOF ``joint`` at the end and the authors' ``anchors`` (forward
    [s], forward + backward range [s]) where the issue gives them."""
    experiment = build_experiment(validate_config(load_config(example), registry), registry)
    sim, rollout, objective = experiment.simulator, experiment.rollout, experiment.objective
    space = sim.design_space()
    controls = RolloutProblem(rollout, objective, free=[])
    everything = RolloutProblem(rollout, objective, free=space.names)
    table = table(rollout.steps, rollout.dt * rollout.substeps)
    x_controls = controls.space.flatten({"controller.table": table}, scaled=True)
    x_all = everything.space.flatten(
        {f"design.{n}": v for n, v in space.defaults().items()} | {"controller.table": table},
        scaled=True)
    design = space.defaults()
    state = sim.initial_state(design)
    for row in np.repeat(table, rollout.substeps, axis=0):
        state = sim.step(state, row, design, rollout.dt)
    end = state.joint_q[sim.model.coordinate_names.index(joint)]
    revolute = JOINT_TYPES[sim.model.joint_type[sim.model.joint_names.index(joint)]] == "revolute"
    print(f"\n{title} (sim_rigid {example.name}): {rollout.steps * rollout.substeps} "
          f"steps of {rollout.dt * 1e3:g} ms, {table.size} controls, {space.size} simulation "
          f"parameters, {len(sim.model.contact_link)} contact points; the controls end with "
          f"{joint} at {f'{np.degrees(end):.0f}°' if revolute else f'{end * 1e3:.1f} mm'}, loss "
          f"{controls.evaluate(x_controls, grad=False).loss:.1f}")
    rows = [("sim_rigid forward", median_time(
                lambda: controls.evaluate(x_controls, grad=False), rounds)),
            ("sim_rigid forward + backward, controls", median_time(
                lambda: controls.evaluate(x_controls), rounds)),
            (f"sim_rigid forward + backward, controls + {space.size} parameters", median_time(
                lambda: everything.evaluate(x_all), rounds))]
    print(f"median of {rounds} (one process, float64):")
    for name, seconds in rows:
        print(f"  {name:<64} {seconds:8.3f} s")
    if anchors is not None:
        print(f"against the authors' C++ (issue 15's anchors): forward {rows[0][1]:.2f} s vs "
              f"{anchors[0]} s; forward + backward {rows[2][1]:.2f} s vs "
              f"{anchors[1][0]}-{anchors[1][1]} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tasks", nargs="+", choices=("reach", "flip", "rotate", "assemble"),
                        default=["reach", "flip", "rotate"])
    args = parser.parse_args()

    registry = get_registry()
    if "reach" in args.tasks:
        finger_reach(registry, args)
    if "flip" in args.tasks:
        contact_episode(registry, args.rounds, title="Flip Box", example=FLIP_EXAMPLE,
                        table=flip_table, joint="hinge",
                        anchors=(CPP_FLIP_FORWARD_S, CPP_FLIP_BACKWARD_S))
    if "rotate" in args.tasks:
        # the issue gives no anchor for the Rubik's cube episode
        contact_episode(registry, args.rounds, title="Rotate Rubik's Cube",
                        example=ROTATE_EXAMPLE, table=rotate_table,
                        joint="layer_turn", anchors=None)
    if "assemble" in args.tasks:
        contact_episode(registry, args.rounds, title="Assemble", example=ASSEMBLE_EXAMPLE,
                        table=lambda steps, control_dt: np.zeros((steps, 8)),
                        joint="box_slide_x", anchors=None)


def finger_reach(registry, args) -> None:
    """Time the Finger Reach episode against MuJoCo (see the module docstring) and print
    the rows, the agreement and the gradient checks."""
    experiment = build_experiment(validate_config(load_config(EXAMPLE), registry), registry)
    sim, rollout, objective = experiment.simulator, experiment.rollout, experiment.objective
    dt, substeps, steps = rollout.dt, rollout.substeps, rollout.steps
    weights = {t.name or type(t.term).__name__: t.weight for t in objective.terms}
    term = next(t.term for t in objective.terms if type(t.term).__name__ == "ReachTargets")
    action_weight = next(t.weight for t in objective.terms if t.term is not term)
    reach_weight = next(t.weight for t in objective.terms if t.term is term)
    space = sim.design_space()
    controls = RolloutProblem(rollout, objective, free=[])
    everything = RolloutProblem(rollout, objective, free=space.names)
    table = np.random.default_rng(args.seed).uniform(-0.1, 0.1, (steps, sim.action_size))
    x_controls = controls.space.flatten({"controller.table": table}, scaled=True)
    x_all = everything.space.flatten(
        {f"design.{n}": v for n, v in space.defaults().items()} | {"controller.table": table},
        scaled=True)
    print(f"Finger Reach (sim_rigid {EXAMPLE.name}): {steps * substeps} steps of "
          f"{dt * 1e3:g} ms, {table.size} controls, {space.size} simulation parameters; "
          f"terms {weights}")
    controls.evaluate(x_controls)  # compiles the kernels outside the timings

    def our_angles(refine: int) -> np.ndarray:
        """sim_rigid's joint angles after every step of Δt (substeps of Δt / refine)."""
        design = space.defaults()
        state, angles = sim.initial_state(design), []
        for row in np.repeat(table, substeps, axis=0):
            for _ in range(refine):
                state = sim.step(state, row, design, dt / refine)
            angles.append(state.joint_q)
        return np.array(angles)

    ours = {1: our_angles(1), 10: our_angles(10)}
    our_loss = controls.evaluate(x_controls, grad=False).loss

    have_mujoco = importlib.util.find_spec("mujoco") is not None
    if have_mujoco:
        import mujoco

        episode = MujocoEpisode(sim.model, term, dt=dt, substeps=substeps,
                                weights=(action_weight, reach_weight))
        print(f"\nagreement under the same torques (MuJoCo {mujoco.__version__}, implicit "
              f"integrator, contact off; the reach has none):")
        for refine in (1, 10):
            runner = MujocoEpisode(sim.model, term, dt=dt, substeps=substeps,
                                   weights=(action_weight, reach_weight), refine=refine)
            loss, angles = runner.run(table, record=True)
            print(f"  both at {dt / refine * 1e3:g} ms: largest joint-angle difference "
                  f"{np.max(np.abs(angles - ours[refine])):.2e} rad over 3 s "
                  f"({np.max(np.abs(angles[:100] - ours[refine][:100])):.2e} over 0.5 s); "
                  f"MuJoCo's loss {loss:.4f}, sim_rigid's at 5 ms {our_loss:.4f}")
        print(f"  sim_rigid at 5 ms vs at 0.5 ms (its own step error): "
              f"{np.max(np.abs(ours[1] - ours[10])):.2e} rad")
    else:
        print("\nMuJoCo is not installed: pip install './packages/sim_rigid[benchmark]'")

    rows = [("sim_rigid forward", median_time(
                lambda: controls.evaluate(x_controls, grad=False), args.rounds)),
            ("sim_rigid forward + backward, controls", median_time(
                lambda: controls.evaluate(x_controls), args.rounds)),
            (f"sim_rigid forward + backward, controls + {space.size} parameters", median_time(
                lambda: everything.evaluate(x_all), args.rounds))]
    n_all = everything.size
    if have_mujoco:
        mj_forward = median_time(lambda: episode.run(table), args.rounds)

        def finite_differences(count: int) -> np.ndarray:
            base, flat = episode.run(table)[0], table.ravel()
            gradient = np.zeros(count)
            for k in range(count):
                moved = flat.copy()
                moved[k % flat.size] += 1e-6
                gradient[k] = (episode.run(moved.reshape(table.shape))[0] - base) / 1e-6
            return gradient

        start = time.perf_counter()
        fd_gradient = finite_differences(n_all)
        fd_time = time.perf_counter() - start
        rows += [("MuJoCo forward", mj_forward),
                 (f"MuJoCo finite differences, {n_all} parameters ({n_all + 1} episodes)",
                  fd_time)]
    mjx = _mjx_peer(sim, term, table, dt=dt, substeps=substeps,
                    weights=(action_weight, reach_weight), rounds=args.rounds)
    if mjx is not None:
        rows += mjx["rows"]
    print(f"\nmedian of {args.rounds} (one process, float64):")
    for name, seconds in rows:
        print(f"  {name:<64} {seconds:8.3f} s")
    forward, backward_controls, backward_all = (seconds for _, seconds in rows[:3])
    print(f"\nagainst the authors' C++ (issue 15's anchors): forward {forward:.2f} s vs "
          f"{CPP_FORWARD_S[0]}-{CPP_FORWARD_S[1]} s ({forward / CPP_FORWARD_S[1]:.2f}x-"
          f"{forward / CPP_FORWARD_S[0]:.2f}x theirs); forward + backward with design "
          f"gradients {backward_all:.2f} s vs {CPP_BACKWARD_S[0]}-{CPP_BACKWARD_S[1]} s "
          f"({backward_all / CPP_BACKWARD_S[1]:.2f}x-{backward_all / CPP_BACKWARD_S[0]:.2f}x)")
    if have_mujoco:
        print(f"sim_rigid forward / MuJoCo forward: {forward / mj_forward:.0f}x")
        print(f"finite differences through MuJoCo / sim_rigid adjoint ({n_all} parameters): "
              f"{fd_time / backward_all:.2f}x (target >= {TARGET_FD_RATIO:g}x: "
              f"{'met' if fd_time / backward_all >= TARGET_FD_RATIO else 'not met'}); "
              f"controls only ({table.size}): "
              f"{fd_time * (table.size + 1) / (n_all + 1) / backward_controls:.2f}x")

    if mjx is not None:
        print(f"MJX ({mjx['integrator']} integrator; its first call compiled for "
              f"{mjx['compile']:.0f} s, not in the times): loss {mjx['loss']:.4f}; "
              f"sim_rigid's adjoint with every parameter / MJX's gradient: "
              f"{backward_all / mjx['rows'][1][1]:.2f}x the time")
    else:
        print("MJX (JAX) is not installed: pip install './packages/sim_rigid[benchmark]'")

    adjoint = controls.evaluate(x_controls).grad
    h = 1e-6
    entries = [0, 37, 119]
    central = [(controls.evaluate(x_controls + h * np.eye(x_controls.size)[k], grad=False).loss
                - controls.evaluate(x_controls - h * np.eye(x_controls.size)[k],
                                    grad=False).loss) / (2 * h) for k in entries]
    print(f"\nadjoint control gradient vs central differences through sim_rigid, entries "
          f"{entries}: largest relative difference "
          f"{np.max(np.abs(adjoint[entries] - central) / np.abs(central)):.1e}")
    if have_mujoco:
        fd = fd_gradient[:table.size]
        cosine = adjoint @ fd / np.linalg.norm(adjoint) / np.linalg.norm(fd)
        print(f"adjoint vs finite differences through MuJoCo (controls): cosine {cosine:.4f}, "
              f"norms {np.linalg.norm(adjoint):.1f} and {np.linalg.norm(fd):.1f} (different "
              f"integrators)")
    if mjx is not None and have_mujoco:
        g = mjx["grad"].ravel()
        print(f"MJX's control gradient vs finite differences through MuJoCo: cosine "
              f"{g @ fd / np.linalg.norm(g) / np.linalg.norm(fd):.4f}")


def _mjx_peer(sim, term, table, *, dt: float, substeps: int, weights: tuple, rounds: int):
    """The reach's loss and gradient through MJX (``peers/mjx_reach.py``), timed after its
    compilation: ``{"rows", "compile", "loss", "grad", "integrator"}``, or None where MJX
    or JAX is not installed."""
    if importlib.util.find_spec("jax") is None or importlib.util.find_spec("mujoco") is None \
            or importlib.util.find_spec("mujoco.mjx") is None:
        return None
    from peers.mjx_reach import PARAMETERS, MjxReach

    targets = np.array([term.target(c * term.control_dt) for c in range(len(table) + 1)])
    started = time.perf_counter()
    episode = MjxReach(mjcf(sim.model, dt=dt, tip_link=term.link, tip_point=term.point),
                       rest=sim.model.joint_rest, targets=targets, substeps=substeps,
                       weights=weights)
    float(episode.loss(table, episode.parameters()))
    loss, grad, parameters = episode.value_and_grad(table)
    compile_s = time.perf_counter() - started
    count = sum(value.size for value in parameters.values())
    forward = median_time(lambda: float(episode.loss(table, episode.parameters())), rounds)
    backward = median_time(lambda: episode.value_and_grad(table), rounds)
    return {"rows": [("MJX forward (JAX, jit)", forward),
                     (f"MJX forward + backward, {table.size} controls + {count} model "
                      f"entries ({', '.join(PARAMETERS)})", backward)],
            "compile": compile_s, "loss": loss, "grad": grad,
            "integrator": episode.integrator}


if __name__ == "__main__":
    main()
