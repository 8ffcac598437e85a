"""The Baxter end-to-end demo (issue 16): fake robot → recorder → bag → identify with sim_pbd →
impedance_controller with the identified model, the nominal model and PD alone, under the
paper's external torque pulses on s1.

Usage (the ROS environment with the Baxter extras, from the repository root)::

    UV_PROJECT_ENVIRONMENT=.venv-ros uv sync --package ros_bridge --extra ros --extra test \\
        --extra fake-baxter --extra demo --locked --inexact
    .venv-ros/bin/python examples/ros/baxter_demo.py --out runs/baxter_demo

Each step runs the nodes as console scripts (their own processes, DDS on loopback, domain
``--domain``), exactly the README's command sequence:

1. ``fake_robot`` (Baxter's left arm in Pinocchio with the true parameters of
   ``ros_bridge.baxter.TRUE_BAXTER``, started at rest where it hangs, at 100 Hz) swings under
   a known sine excitation on every joint from ``EXCITATION_START`` s; ``recorder`` writes
   /joint_states (the applied torque in ``effort``) to ``<out>/baxter_excitation``.
2. ``identify examples/ros/baxter_identify.yaml --bag ...`` fits link masses, joint damping
   and the spring's k and α₂ in sim_pbd from ``--window`` s starting 0.1 s before the
   excitation, from the measured initial pose; the fitted design goes to
   ``<out>/fitted.npz``.
3. The net-torque model of each design: sim_pbd's holding torque at the goal pose (gravity
   and spring, what the fitted parameters change), as a ``NetTorqueMap`` file.
4. For the identified model, the nominal one and PD alone: ``fake_robot`` (500 Hz, braked at
   the goal until the first command; 5 N m on s1 over [1, 3) s and 10 N m over [4, 6) s of
   its time) with ``impedance_controller`` (``trigger:=state``) and ``recorder``.
5. Prints the fitted parameters against the truth and the tracking errors, and writes the
   plots ``parameters.png`` and ``tracking.png`` to ``<out>``.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from codesign.impedance import NetTorqueMap
from ros_bridge.bags import read_joint_states
from ros_bridge.baxter import LEFT_ARM, NOMINAL_SPRING, TRUE_BAXTER, baxter_urdf
from ros_bridge.identify import identify

HERE = Path(__file__).parent
JOINTS = list(LEFT_ARM)
BIN = Path(sys.executable).parent
EXCITATION_AMPLITUDE = [1.0, 9.0, 1.0, 1.5, 0.3, 0.3, 0.1]  # N m (s1: a 1.5 rad swing)
EXCITATION_FREQUENCY = [0.7, 0.5, 0.9, 0.6, 1.1, 0.8, 1.3]  # Hz (and φ times each)
EXCITATION_START = 4.0  # s of the robot's time: the recorder is discovered well before
HANGING = [0.0, 0.55, 0.0, 1.0, 0.0, 0.0, 0.0]  # near the arm's rest pose with its spring
GOAL = [0.0, 0.1, 0.0, 0.9, 0.0, 0.4, 0.0]  # rad, inside the URDF's limits
STIFFNESS = [30.0, 30.0, 20.0, 20.0, 5.0, 5.0, 2.0]  # N m/rad
DAMPING = [3.0, 3.0, 2.0, 2.0, 0.3, 0.3, 0.05]  # N m s/rad
PULSES = [("left_s1", 5.0, 1.0, 3.0), ("left_s1", 10.0, 4.0, 6.0)]  # joint, N m, start, end
CONTROL_TIME = 7.0  # s of the robot's time per controller run (the last pulse ends at 6)


def ros_value(value) -> str:
    """A ROS parameter value on the command line."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple, np.ndarray)):
        return "[" + ",".join(v if isinstance(v, str) else repr(float(v)) for v in value) + "]"
    if isinstance(value, int):
        return str(value)
    return repr(float(value)) if isinstance(value, float) else str(value)


def launch(executable: str, parameters: dict, *, domain: int, log: Path) -> subprocess.Popen:
    """Start a node's console script with ``parameters``, its output to ``log``."""
    command = [str(BIN / executable), "--ros-args"]
    for name, value in parameters.items():
        if value != "":  # an empty string does not parse as a ROS argument: the default
            command += ["-p", f"{name}:={ros_value(value)}"]
    # a domain of its own; not ROS_LOCALHOST_ONLY=1: with it a subscriber started before its
    # publisher's process was seen never to receive (Fast DDS here)
    env = {k: v for k, v in os.environ.items() if k != "ROS_LOCALHOST_ONLY"}
    env["ROS_DOMAIN_ID"] = str(domain)
    return subprocess.Popen(command, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)


def stop(processes) -> None:
    """SIGTERM to each node in turn, waiting for each (a controller then publishes zero
    torque). Stop the recorder first: a node blocked waiting for messages handles the signal
    only when one arrives, so its publishers must still be up."""
    for process in processes:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def record_excitation(out: Path, *, domain: int, window: float) -> Path:
    """Step 1: the fake robot swinging under the excitation, recorded into a bag."""
    bag = out / "baxter_excitation"
    # the publisher first: a recorder started before it was seen to receive nothing
    robot = launch("fake_robot", {
        "robot": "baxter", "rate": 100.0, "substeps": 20, "initial_q": HANGING,
        "rest_pose": True, "excitation_amplitude": EXCITATION_AMPLITUDE,
        "excitation_frequency": EXCITATION_FREQUENCY, "excitation_start": EXCITATION_START,
        "excitation_hold": 0.01}, domain=domain, log=out / "robot1.log")
    time.sleep(1.0)
    recorder = launch("recorder", {"topics": ["/joint_states"],
                                   "types": ["sensor_msgs/msg/JointState"],
                                   "output": str(bag)}, domain=domain, log=out / "rec1.log")
    time.sleep(EXCITATION_START + window + 2.0)  # wall time ≥ the robot's: a margin
    stop([recorder, robot])
    return bag


def recording_start(bag: Path) -> tuple[float, dict]:
    """The identification's ``start`` [s] (0.1 s before the excitation) and the measured
    pose there."""
    states = read_joint_states(bag, "/joint_states", JOINTS)
    moving = np.flatnonzero(np.any(states.effort != 0.0, axis=1))
    if moving.size == 0:
        raise RuntimeError(f"{bag}: no excitation recorded (no nonzero effort)")
    start = max(0.0, round(float(states.time[moving[0]] - states.time[0]) - 0.1, 2))
    index = int(np.argmin(np.abs(states.time - states.time[0] - start)))
    return start, {name: float(q) for name, q in zip(JOINTS, states.position[index],
                                                     strict=True)}


def truth() -> dict[str, np.ndarray]:
    """The fake robot's true values of the fitted parameters."""
    from sim_pbd.scene import make_simulator

    sim = make_simulator(urdf="baxter", joints=JOINTS, joint_limits=False)
    return {"link.mass": sim.design_space().defaults()["link.mass"] * TRUE_BAXTER.mass_scale,
            "joint.damping": TRUE_BAXTER.damping,
            "spring.stiffness": np.array([TRUE_BAXTER.spring.stiffness]),
            "spring.offset": np.array([TRUE_BAXTER.spring.offset])}


def holding_map(design: dict, path: Path, *, substeps: int) -> Path:
    """Step 3: a NetTorqueMap holding sim_pbd's holding torque at the goal for ``design``
    (constant over its 2 × 2 grid: the part of τ_net the fitted parameters change)."""
    from sim_pbd.scene import make_simulator
    from sim_pbd.torque_estimation import holding_torque

    spring = {"joint": "left_s1", "stiffness": float(design["spring.stiffness"][0]),
              "offset": float(design["spring.offset"][0]),
              **{k: getattr(NOMINAL_SPRING, k) for k in ("rest_length", "lever_parent",
                                                         "lever_child", "angle")}}
    sim = make_simulator(urdf="baxter", joints=JOINTS, joint_limits=False, substeps=substeps,
                         springs=[spring])
    full = {**sim.design_space().defaults(), **{k: np.asarray(v) for k, v in design.items()}}
    hold = holding_torque(sim, full, np.array(GOAL), dt=0.01)
    NetTorqueMap(joints=JOINTS, angle_steps=[-0.01, 0.01], rates=[-1.0, 1.0],
                 torques=np.repeat(hold[:, None, None], 2, axis=1).repeat(2, axis=2),
                 dt=0.01, goal=GOAL).save(path)
    return path


def control_run(out: Path, name: str, model_file: str, *, domain: int) -> Path:
    """Step 4: one controller on the fake robot under the pulses, recorded."""
    bag = out / f"control_{name}"
    robot = launch("fake_robot", {
        "robot": "baxter", "rate": 500.0, "substeps": 4, "initial_q": GOAL, "brake": True,
        "pulse_joint": [p[0] for p in PULSES], "pulse_torque": [p[1] for p in PULSES],
        "pulse_start": [p[2] for p in PULSES], "pulse_end": [p[3] for p in PULSES]},
        domain=domain, log=out / f"robot_{name}.log")
    time.sleep(1.0)
    recorder = launch("recorder", {
        "topics": ["/joint_states", "/effort_controller/commands"],
        "types": ["sensor_msgs/msg/JointState", "std_msgs/msg/Float64MultiArray"],
        "output": str(bag)}, domain=domain, log=out / f"rec_{name}.log")
    time.sleep(2.0)  # the recorder and the robot discovered before the controller starts
    controller = launch("impedance_controller", {
        "joints": JOINTS, "urdf": str(baxter_urdf()), "stiffness": STIFFNESS, "damping": DAMPING,
        "goal_q": GOAL, "rate": 500.0, "trigger": "state", "torque_rate": 5.0,
        "model_file": model_file}, domain=domain, log=out / f"controller_{name}.log")
    time.sleep(CONTROL_TIME + 4.0)
    stop([recorder, controller, robot])
    return bag


def tracking(bag: Path) -> dict[str, np.ndarray]:
    """The run's robot time [s] from its release, joint angles and applied torques."""
    states = read_joint_states(bag, "/joint_states", JOINTS)
    released = np.flatnonzero(np.any(states.effort != 0.0, axis=1))[0]
    keep = slice(released, None)
    robot_time = states.time[keep] - states.time[released]
    inside = robot_time < CONTROL_TIME
    return {"time": robot_time[inside], "q": states.position[keep][inside],
            "torque": states.effort[keep][inside]}


def summarize(runs: dict[str, dict]) -> list[str]:
    """The tracking table: holding at the goal without a pulse (before the first, after the
    last), and s1 at the end of each pulse (where PD with these gains alone would sit at
    τ/K = +0.167 and +0.333 rad if its model were exact)."""
    lines = ["| controller | ‖q − q_d‖, 0.5-1 s [rad] | ‖q − q_d‖, 6.5-7 s [rad] | "
             "s1 error, 0.5-1 s [rad] | s1 at 5 N m (t = 3 s) | s1 at 10 N m (t = 6 s) | "
             "largest |τ_s1| [N m] |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, run in runs.items():
        error = run["q"] - np.array(GOAL)

        def window(t0, t1, error=error, run=run):
            return error[(run["time"] >= t0) & (run["time"] < t1)]

        at = [float(error[np.searchsorted(run["time"], t) - 1, 1]) for t in (3.0, 6.0)]
        before, after = window(0.5, 1.0), window(6.5, 7.0)
        lines.append(f"| {name} | {np.linalg.norm(before, axis=1).mean():.4f} | "
                     f"{np.linalg.norm(after, axis=1).mean():.4f} | "
                     f"{before[:, 1].mean():+.4f} | {at[0]:+.4f} | {at[1]:+.4f} | "
                     f"{np.abs(run['torque'][:, 1]).max():.2f} |")
    return lines


def plot(out: Path, fitted: dict, true: dict, runs: dict) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(8, 3.5), layout="constrained")
    FigureCanvasAgg(figure)
    axis = figure.subplots()
    labels, errors = [], []
    for name in true:
        for i, (f, t) in enumerate(zip(np.ravel(fitted[name]), np.ravel(true[name]),
                                       strict=True)):
            labels.append(f"{name.split('.')[1]} {i}" if np.size(true[name]) > 1 else name)
            errors.append(100.0 * (f / t - 1.0))
    axis.bar(range(len(errors)), errors)
    axis.axhline(2.0, color="k", ls=":")
    axis.axhline(-2.0, color="k", ls=":")
    axis.set_xticks(range(len(labels)), labels, rotation=60, fontsize=7)
    axis.set(ylabel="fitted / true − 1 [%]", title="identified parameters against the truth")
    figure.savefig(out / "parameters.png", dpi=120)

    figure = Figure(figsize=(9, 6), layout="constrained")
    FigureCanvasAgg(figure)
    error_axis, torque_axis = figure.subplots(2, 1, sharex=True)
    for name, run in runs.items():
        error_axis.plot(run["time"], run["q"][:, 1] - GOAL[1], label=name)
        torque_axis.plot(run["time"], run["torque"][:, 1], label=name)
    error_axis.set(ylabel="s1 error q − q_d [rad]", title="under 5 and 10 N m on s1")
    torque_axis.set(xlabel="robot time [s]", ylabel="s1 motor torque [N m]")
    error_axis.legend()
    figure.savefig(out / "tracking.png", dpi=120)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/baxter_demo"))
    parser.add_argument("--domain", type=int, default=81, help="ROS_DOMAIN_ID of the nodes")
    parser.add_argument("--window", type=float, default=4.0, help="seconds identified")
    parser.add_argument("--segment", type=float, default=0.5,
                        help="seconds per segment, each from its measured state (0: the "
                             "whole window from the first state, single shooting)")
    parser.add_argument("--substeps", type=int, default=100, help="sim_pbd substeps per 10 ms")
    parser.add_argument("--iterations", type=int, default=30,
                        help="the fit's least-squares iterations")
    args = parser.parse_args(argv)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)

    bag = record_excitation(out, domain=args.domain, window=args.window)
    start, pose = recording_start(bag)
    started = time.perf_counter()
    fitted = identify(HERE / "baxter_identify.yaml", out=out / "identification",
                      design=out / "fitted.npz", bag=bag, settings={
                          "identification.recordings.options.start": start,
                          "identification.recordings.options.duration": args.window,
                          "identification.recordings.options.segment": args.segment or None,
                          "simulator.options.initial_positions": pose,
                          "simulator.options.substeps": args.substeps,
                          "optimizer.iterations": args.iterations})
    seconds = time.perf_counter() - started
    true = truth()
    shooting = f"{args.segment} s segments" if args.segment else "single shooting"
    print(f"identified from {args.window} s of {bag.name} ({shooting}, {args.substeps} "
          f"substeps, {seconds:.0f} s)\n")
    print("| parameter | true | nominal | fitted | error |\n| --- | --- | --- | --- | --- |")
    from sim_pbd.scene import make_simulator

    nominal_sim = make_simulator(urdf="baxter", joints=JOINTS, joint_limits=False)
    nominal = {"link.mass": nominal_sim.design_space().defaults()["link.mass"],
               "joint.damping": nominal_sim.design_space().defaults()["joint.damping"],
               "spring.stiffness": np.array([NOMINAL_SPRING.stiffness]),
               "spring.offset": np.array([NOMINAL_SPRING.offset])}
    for name, values in true.items():
        for i, t in enumerate(np.ravel(values)):
            f, n = np.ravel(fitted[name])[i], np.ravel(nominal[name])[i]
            label = f"{name}[{JOINTS[i]}]" if np.size(values) > 1 else name
            print(f"| {label} | {t:.4f} | {n:.4f} | {f:.4f} | {100 * (f / t - 1):+.2f} % |")

    maps = {"identified": str(holding_map(fitted, out / "identified_map.npz", substeps=100)),
            "nominal": str(holding_map(nominal, out / "nominal_map.npz", substeps=100)),
            "PD": ""}
    runs = {name: tracking(control_run(out, name, model, domain=args.domain))
            for name, model in maps.items()}
    print()
    print("\n".join(summarize(runs)))
    plot(out, fitted, true, runs)
    print(f"\nplots: {out / 'parameters.png'}, {out / 'tracking.png'}")


if __name__ == "__main__":
    main()
