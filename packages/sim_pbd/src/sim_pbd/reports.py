"""The plots and numbers sim_pbd's experiments add to a run directory (the core's report
hook, :class:`codesign.run_directory.ReportContext`): estimated against true joint torques
along a trajectory (:func:`torque_report`), a fitted joint-space spring and how still
the robot stays at its holding poses (:func:`holding_report`), holding torques estimated
at static poses against reference ones beside the paper's Table III
(:func:`holding_torque_report`), and impedance control against PD with its net-torque map
(:func:`impedance_report`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from codesign.outputs import new_figure, write_figure

from .kinematics import joint_positions
from .springs import spring_torques

__all__ = ["PAPER_GRAVITY_TORQUES", "holding_report", "holding_torque_report", "impedance_report",
           "torque_report"]

PAPER_GRAVITY_TORQUES = {"left_s1": (-29.0, -11.6, -39.1, 0.669),
                         "left_e1": (-10.8, -3.99, -14.2, 0.431),
                         "left_w1": (-1.20, -0.5096, -1.56, 0.698)}
"""The paper's Table III (gravity compensation of a real Baxter's left arm at its own 30
poses): per joint the estimated torque's mean, max and min and its MAE [N m]."""


def _figure(rows: int, columns: int, *, size=(10.0, 6.0)):
    """A figure (the core's) and its axes grid, flattened."""
    figure = new_figure(size=size, layout="constrained")
    return figure, np.atleast_1d(figure.subplots(rows, columns, squeeze=False).ravel())


def torque_report(folder: Path, *, joint_names, control_dt: float, estimated, true=None,
                  recorded_q=None, simulated_q=None) -> dict:
    """``torques.png`` (per joint, the estimated torques [N m] over time, beside the true
    ones when known) and the numbers: per joint and overall RMSE [N m] against ``true``,
    and the largest gap [rad] between the simulated and recorded angles.

    Args:
        joint_names: the m joints.
        control_dt: the control period [s].
        estimated: the estimated torques, (T, m).
        true: the torques that drove the recording, (≥ T, m), or None.
        recorded_q, simulated_q: joint angles (T + 1, m) [rad] recorded and simulated
            under ``estimated``, or None.
    """
    estimated = np.asarray(estimated, dtype=np.float64)
    steps, m = estimated.shape
    time = control_dt * np.arange(steps)
    figure, axes = _figure(2, (m + 1) // 2, size=(3.0 * ((m + 1) // 2), 5.5))
    numbers: dict = {"steps": steps}
    if true is not None:
        true = np.asarray(true, dtype=np.float64)[:steps]
        rmse = np.sqrt(np.mean((estimated - true) ** 2, axis=0))
        numbers["rmse_n_m"] = {name: float(v) for name, v in zip(joint_names, rmse,
                                                                 strict=True)}
        numbers["rmse_all_joints_n_m"] = float(np.sqrt(np.mean(rmse ** 2)))
    if recorded_q is not None and simulated_q is not None:
        rows = min(len(recorded_q), len(simulated_q))
        numbers["largest_angle_gap_rad"] = float(np.max(np.abs(
            np.asarray(simulated_q)[:rows] - np.asarray(recorded_q)[:rows])))
    for j, (axis, name) in enumerate(zip(axes, joint_names, strict=False)):
        if true is not None:
            axis.plot(time, true[:, j], "k", label="true")
        axis.plot(time, estimated[:, j], "C0--", label="estimated")
        axis.set(title=name, xlabel="t [s]", ylabel="τ [N m]")
    for axis in axes[m:]:
        axis.set_visible(False)
    axes[0].legend(fontsize=8)
    numbers["plot"] = write_figure(Path(folder) / "torques.png", figure).name
    return numbers


def holding_report(folder: Path, *, simulator, initial_design: dict, design: dict,
                   joint_q, torques, truth: dict | None, dt: float, substeps: int,
                   starts) -> dict:
    """How still the robot stays at each holding pose over one control step (``substeps``
    steps of ``dt`` [s]) at the
    fitted ``design`` (largest angle change [rad], mean and per pose), and with springs
    ``spring_torque.png``: each spring's torque over its joint's range at the initial,
    fitted and true designs (the paper's Fig. 8), with the poses' angles marked.

    Args:
        simulator: the :class:`~sim_pbd.simulator.PBDSimulator`.
        joint_q, torques: the poses and holding torques, (P, m).
        truth: the design parameters behind the data, or None.
        starts: the robot at rest at each pose (P states).
    """
    model = simulator.model
    params = simulator.parameters(design)
    moved = []
    for state, torque, pose in zip(starts, torques, joint_q, strict=True):
        for _ in range(int(substeps)):
            state = simulator.step(state, torque, design, dt)
        moved.append(np.max(np.abs(joint_positions(model, params, state)[0] - pose)))
    moved = np.array(moved)
    numbers = {"poses": len(moved), "largest_angle_change_rad": float(moved.max()),
               "mean_angle_change_rad": float(moved.mean())}
    springs = simulator.springs
    if springs is None:
        return numbers
    figure, axes = _figure(1, springs.count, size=(5.0 * springs.count, 4.0))
    for s, axis in enumerate(axes):
        j = int(springs.joint[s])
        low, high = model.joint_lower[j], model.joint_upper[j]
        if not (np.isfinite(low) and np.isfinite(high)):
            low, high = np.min(joint_q[:, j]), np.max(joint_q[:, j])
        angles = np.linspace(low, high, 200)
        q = np.zeros((angles.size, model.joint_count))
        q[:, j] = angles
        for label, values, style in (("initial", initial_design, "k:"),
                                     ("fitted", design, "C0--"), ("true", truth, "k")):
            if not values or "spring.stiffness" not in values:
                continue
            curve = [spring_torques(springs, row, values["spring.stiffness"],
                                    values["spring.offset"])[j] for row in q]
            axis.plot(angles, curve, style, label=label)
        axis.plot(joint_q[:, j], np.zeros(len(joint_q)), "C3|", markersize=12,
                  label="poses")
        axis.set(xlabel=f"{model.joint_names[j]} [rad]", ylabel="spring torque [N m]",
                 title=f"spring {s} (Eq. 31)")
        axis.legend(fontsize=8)
    numbers["plot"] = write_figure(Path(folder) / "spring_torque.png", figure).name
    return numbers


def holding_torque_report(folder: Path, *, joint_names, estimated, reference) -> dict:
    """``holding_torques.png`` (per joint, the estimated and reference holding torques
    [N m] over the poses) and the numbers: per joint the estimates' mean, max and min and
    their mean absolute error against ``reference`` [N m], beside the paper's Table III
    (:data:`PAPER_GRAVITY_TORQUES`) for the joints it lists; the MAE over all joints and the
    largest error.

    Args:
        joint_names: the m joints.
        estimated: the estimated holding torques, (P, m) [N m].
        reference: the torques they are compared with (e.g. a reference library's g(q)),
            (P, m) [N m].
    """
    estimated = np.asarray(estimated, dtype=np.float64)
    reference = np.asarray(reference, dtype=np.float64)
    if estimated.shape != reference.shape or estimated.ndim != 2:
        raise ValueError(f"estimated {estimated.shape} and reference {reference.shape} "
                         "torques must both have shape (poses, joints)")
    poses, m = estimated.shape
    error = np.abs(estimated - reference)
    joints = {}
    for j, name in enumerate(joint_names):
        row = {"mean_n_m": float(estimated[:, j].mean()), "max_n_m": float(estimated[:, j].max()),
               "min_n_m": float(estimated[:, j].min()), "mae_n_m": float(error[:, j].mean())}
        if name in PAPER_GRAVITY_TORQUES:
            row["paper"] = dict(zip(("mean_n_m", "max_n_m", "min_n_m", "mae_n_m"),
                                    PAPER_GRAVITY_TORQUES[name], strict=True))
        joints[name] = row
    columns = (m + 1) // 2
    figure, axes = _figure(2, columns, size=(3.0 * columns, 5.5))
    index = np.arange(poses)
    for j, (axis, name) in enumerate(zip(axes, joint_names, strict=False)):
        axis.plot(index, reference[:, j], "ko", markersize=4, label="reference")
        axis.plot(index, estimated[:, j], "C0x", markersize=5, label="estimated")
        axis.set(title=f"{name} (MAE {joints[name]['mae_n_m']:.3g} N m)", xlabel="pose",
                 ylabel="τ [N m]")
    for axis in axes[m:]:
        axis.set_visible(False)
    axes[0].legend(fontsize=8)
    return {"poses": poses, "joints": joints, "mae_all_joints_n_m": float(error.mean()),
            "largest_error_n_m": float(error.max()),
            "plot": write_figure(Path(folder) / "holding_torques.png", figure).name}


def _push_windows(pushes, control_dt: float, steps: int):
    """Per push row [start, end, τ…]: (its torques, the control steps it covers plus the
    state after it)."""
    for start, end, *torque in np.asarray(pushes, dtype=np.float64):
        first = int(np.ceil(start / control_dt - 1e-9))
        last = min(int(np.ceil(end / control_dt - 1e-9)), steps)
        yield np.array(torque), slice(first, last + 1)


def impedance_report(folder: Path, *, joint_names, control_dt: float, goal, pushes, external,
                     runs: dict, parts: dict, net_torque=None) -> dict:
    """Impedance control against other controllers (the paper's Figs. 12 and 13).

    Writes ``impedance_control.png`` (per joint: each run's motor torque, its joint angle
    with the goal, and the external torque with the parts of the first run's law) and,
    given ``net_torque`` (a :class:`codesign.impedance.NetTorqueMap`), ``net_torque_map.npz``
    (the file a robot's controller loads) and ``net_torque_map.png`` (τ_net over Δθ and ω).

    Args:
        joint_names: the m joints.
        control_dt: the control period [s].
        goal: the goal angles (m,) [rad].
        pushes: rows [start s, end s, τ_1 … τ_m N m] of external torque.
        external: the external torques at each control step, (K, m) [N m].
        runs: name -> (joint angles (K + 1, m) [rad], motor torques (K, m) [N m]).
        parts: name -> a part of the first run's law at each control step, (K, m) [N m].

    Returns per run and push (and per joint) the largest angle error [rad], the error at
    the push's end [rad] and the largest motor torque [N m] over it.
    """
    goal, external = np.asarray(goal, dtype=np.float64), np.asarray(external, np.float64)
    steps, m = external.shape
    time = control_dt * np.arange(steps + 1)
    figure, axes = _figure(3, m, size=(8.0 * m, 8.0))
    axes = axes.reshape(3, m).T  # per joint: torque, angle, parts
    numbers: dict = {"pushes": []}
    for j, name in enumerate(joint_names):
        torque_axis, angle_axis, parts_axis = axes[j]
        for label, (joint_q, torques) in runs.items():
            torque_axis.plot(time[:-1], np.asarray(torques)[:, j], label=label)
            angle_axis.plot(time, np.asarray(joint_q)[:, j], label=label)
        angle_axis.axhline(goal[j], color="k", lw=0.5, ls=":")
        parts_axis.plot(time[:-1], external[:, j], "k", label="external")
        for label, part in parts.items():
            parts_axis.plot(time[:-1], np.asarray(part)[:, j], label=label)
        torque_axis.set(ylabel="motor torque [N m]", title=f"{name}, goal {goal[j]:.3g} rad")
        angle_axis.set(ylabel="angle [rad]")
        parts_axis.set(xlabel="time [s]", ylabel="torque [N m]")
        for axis in (torque_axis, angle_axis, parts_axis):
            axis.legend(fontsize=8)
    for torque, window in _push_windows(pushes, control_dt, steps):
        row = {"torque_n_m": torque.tolist(), "start_s": window.start * control_dt,
               "end_s": (window.stop - 1) * control_dt}
        for label, (joint_q, torques) in runs.items():
            error = np.asarray(joint_q)[window] - goal
            row[label] = {"largest_error_rad": np.abs(error).max(0).tolist(),
                          "error_at_end_rad": error[-1].tolist(),
                          "largest_torque_n_m": np.abs(np.asarray(torques)[
                              window.start:window.stop - 1]).max(0).tolist()}
        numbers["pushes"].append(row)
    numbers["plot"] = write_figure(Path(folder) / "impedance_control.png", figure).name
    if net_torque is not None:
        numbers["map"] = net_torque.save(Path(folder) / "net_torque_map.npz").name
        numbers["map_plot"] = _map_figure(Path(folder) / "net_torque_map.png", net_torque)
        numbers["map_range_n_m"] = [float(net_torque.torques.min()),
                                    float(net_torque.torques.max())]
    return numbers


def _map_figure(path: Path, net_torque) -> str:
    """``path``: each joint's τ_net [N m] over Δθ [rad] and ω [rad/s] (Fig. 12)."""
    joints = len(net_torque.joints)
    figure, axes = _figure(1, joints, size=(5.0 * joints, 4.0))
    for axis, name, table in zip(axes, net_torque.joints, net_torque.torques, strict=True):
        mesh = axis.pcolormesh(net_torque.rates, net_torque.angle_steps, table,
                               shading="nearest", cmap="viridis")
        figure.colorbar(mesh, ax=axis, label="τ_net [N m]")
        axis.set(title=f"{name}: net torque map", xlabel="ω [rad/s]", ylabel="Δθ [rad]")
    return write_figure(path, figure).name
