"""Baxter left-arm step speed: sim_pbd against the paper's method in PyTorch and against
MuJoCo, side by side in one run.

Scene: Baxter's left arm (7 revolute joints, the rest of the robot frozen), joint limits
off, the URDF's damping 0.7 N m s/rad, gravity, released at rest from a bent pose;
Δt = 0.01 s, float64 on the CPU. It

1. checks that the autograd peer (``peers/pbd_autograd.py``: the paper's Jacobi XPBD in
   PyTorch, backpropagation through the graph) produces sim_pbd's trajectory at the same
   settings (1 substep, 30 Jacobi iterations: the paper's) within 1e-9 rad over
   ``--check-steps`` steps under constant torques, and the same one-step VJP (state, torques
   and design parameters) within 1e-9 relative;
2. measures each one's accuracy: the largest joint-angle error over the first 0.25 s of the
   release against Pinocchio's ABA integrated by fine RK4 (``reference.py`` of the sim_pbd
   tests), and picks MuJoCo's setting at matched accuracy: the cheapest of its Euler,
   implicitfast and RK4 integrators at Δt/1, /2, /4, ... whose error is at most sim_pbd's at
   its settings (the defaults unless chosen; the MuJoCo step then means that many
   ``mj_step`` calls);
3. prints ms per step and per step + VJP: the median (best) of ``--rounds`` interleaved
   rounds, each round about 50 ms of calls per implementation (a handful of calls of a cheap
   step would time the caches the previous peer left cold), and each peer's median time
   over sim_pbd's in the same round (above 1: sim_pbd is faster), against issue 14's
   targets (≥10x the autograd peer forward and forward+backward; forward within 2x of
   MuJoCo's step);

and finally, in a fresh process, the peak memory of a reverse sweep of ``--memory-steps``
steps through ``codesign.Rollout`` (√N checkpointing) at the default settings, from
tracemalloc (NumPy allocations) and the process's peak resident set size.

sim_pbd runs through its simulator (``PBDSimulator.step`` and ``step_vjp``, the hand-derived
adjoint). The peer's forward is timed without a graph (``torch.no_grad``), its step + VJP as
the forward recording the graph plus ``torch.autograd.grad``. MuJoCo has no VJP here. Peers
run only when importable: ``pip install ./packages/codesign './packages/sim_pbd[benchmark]'``
(torch, mujoco); the accuracy column needs Pinocchio (the workspace's dev dependency ``pin``).

Usage: ``python benchmarks/pbd_step.py [--rounds 5] [--check-steps 100] [--threads 1]
[--memory-steps 10000] [--substeps N --iterations M]`` (``--memory-steps 0`` skips the sweep;
``--substeps``/``--iterations`` time sim_pbd at other settings than its defaults, MuJoCo
matched to their accuracy; the memory sweep always runs the defaults).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import time
import tracemalloc
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from sim_pbd.kinematics import joint_positions
from sim_pbd.scene import make_simulator
from sim_pbd.simulator import DESIGN_FIELDS
from sim_pbd.state import PBDState

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from peers.memory import peak_rss_mib  # noqa: E402

LEFT_ARM = ["left_s0", "left_s1", "left_e0", "left_e1", "left_w0", "left_w1", "left_w2"]
POSE = [0.3, -0.5, 0.8, 1.0, -0.6, 0.9, 0.2]  # [rad], the release pose of test_accuracy.py
DT = 0.01  # [s]
DAMPING = 0.7  # [N m s/rad], the URDF's
HORIZON = 0.25  # [s] of the accuracy comparison (the undamped swing's chaos-free window)
PAPER = dict(substeps=1, iterations=30, solver="jacobi", scheme="first_order")
TORQUES = np.array([0.5, -1.0, 0.3, 0.2, -0.1, 0.05, 0.02])  # [N m] of the checks
_TOLERANCE = 1e-9  # [rad] trajectory, and relative one-step VJP, peer against sim_pbd
_TARGETS = {"autograd": 10.0, "MuJoCo": 0.5}  # issue 14: peer time / sim_pbd time >= this
_REFERENCE = Path(__file__).parents[1] / "packages" / "sim_pbd" / "tests" / "reference.py"
_HINT = "pip install ./packages/codesign './packages/sim_pbd[benchmark]'"


def load_reference():
    """The Pinocchio reference helpers of the sim_pbd tests, or None without Pinocchio."""
    if importlib.util.find_spec("pinocchio") is None:
        return None
    spec = importlib.util.spec_from_file_location("sim_pbd_reference", _REFERENCE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def reference_arm():
    """(the reference helpers, Pinocchio's model of the left arm, its data): the examples'
    ground truth; exits with the install hint without Pinocchio."""
    reference = load_reference()
    if reference is None:
        raise SystemExit("the reference library is missing: pip install pin")
    arm = reference.reduced_baxter(LEFT_ARM)
    return reference, arm, arm.createData()


def simulator(**settings):
    """The benchmark's arm in sim_pbd with ``settings`` (substeps, iterations, solver)."""
    return make_simulator(urdf="baxter", joints=LEFT_ARM, joint_limits=False,
                          initial_positions=POSE, damping=DAMPING, **settings)


class Ours:
    """sim_pbd through its simulator: step, step_vjp, joint angles."""

    def __init__(self, **settings):
        self.sim = simulator(**settings)
        self.design = self.sim.design_space().defaults()
        self.params = self.sim.parameters(self.design)
        self.state = self.sim.initial_state(self.design)
        self.seed = PBDState(*(np.ones_like(a) for a in vars(self.state).values()))

    def angles(self, steps: int, action) -> np.ndarray:
        """Joint angles [rad] (steps + 1, 7) from the release under constant ``action``."""
        state = self.sim.initial_state(self.design)
        rows = [joint_positions(self.sim.model, self.params, state)[0]]
        for _ in range(steps):
            state = self.sim.step(state, action, self.design, DT)
            rows.append(joint_positions(self.sim.model, self.params, state)[0])
        return np.array(rows)

    def time_forward(self, steps: int) -> float:
        zero = np.zeros(7)
        start = time.perf_counter()
        for _ in range(steps):
            self.state = self.sim.step(self.state, zero, self.design, DT)
        return 1e3 * (time.perf_counter() - start) / steps

    def time_backward(self, steps: int) -> float:
        zero = np.zeros(7)
        start = time.perf_counter()
        for _ in range(steps):
            self.sim.step(self.state, zero, self.design, DT)
            self.sim.step_vjp(self.state, zero, self.design, DT, self.seed)
        return 1e3 * (time.perf_counter() - start) / steps


class Autograd:
    """The PyTorch peer behind the same interface."""

    def __init__(self, torch, peer_class, **settings):
        self.torch = torch
        self.ours = Ours(**settings)
        self.peer = peer_class(self.ours.sim.model, substeps=settings["substeps"],
                               iterations=settings["iterations"])
        self.state = self.peer.initial(self.ours.state)
        self.zero = torch.zeros(7, dtype=torch.float64)

    def _as_state(self, tensors) -> PBDState:
        return PBDState(*(t.detach().numpy() for t in tensors))

    def angles(self, steps: int, action) -> np.ndarray:
        ours = self.ours
        state = self.peer.initial(ours.sim.initial_state(ours.design))
        action = self.torch.as_tensor(action, dtype=self.torch.float64)
        rows = [joint_positions(ours.sim.model, ours.params, self._as_state(state))[0]]
        with self.torch.no_grad():
            for _ in range(steps):
                state = self.peer.step(*state, action, DT)
                rows.append(joint_positions(ours.sim.model, ours.params,
                                            self._as_state(state))[0])
        return np.array(rows)

    def vjp(self, state: PBDState, action, seed: PBDState):
        """(∂L/∂state as a PBDState, ∂L/∂action, ∂L/∂design) of one step."""
        torch = self.torch
        inputs = [t.requires_grad_(True) for t in self.peer.initial(state)]
        action = torch.as_tensor(action, dtype=torch.float64).requires_grad_(True)
        params = {k: v.clone().requires_grad_(True) for k, v in self.peer.params.items()}
        out = self.peer.step(*inputs, action, DT, params)
        grads = torch.autograd.grad(out, [*inputs, action, *params.values()],
                                    grad_outputs=[torch.as_tensor(a) for a in vars(seed).values()])
        names = {field: name for name, field in DESIGN_FIELDS.items()}
        design = {names[k]: g.numpy() for k, g in zip(params, grads[5:], strict=True)}
        return PBDState(*(g.numpy() for g in grads[:4])), grads[4].numpy(), design

    def time_forward(self, steps: int) -> float:
        start = time.perf_counter()
        with self.torch.no_grad():
            for _ in range(steps):
                self.state = self.peer.step(*self.state, self.zero, DT)
        return 1e3 * (time.perf_counter() - start) / steps

    def time_backward(self, steps: int) -> float:
        torch = self.torch
        seeds = [torch.ones_like(t) for t in self.state]
        start = time.perf_counter()
        for _ in range(steps):
            inputs = [t.detach().requires_grad_(True) for t in self.state]
            action = self.zero.clone().requires_grad_(True)
            out = self.peer.step(*inputs, action, DT)
            torch.autograd.grad(out, [*inputs, action], grad_outputs=seeds)
        return 1e3 * (time.perf_counter() - start) / steps


def mujoco_model(mujoco):
    """The arm in MuJoCo from Baxter's URDF: visuals, collisions (their missing meshes),
    Gazebo and transmission tags stripped in memory, every joint but the left arm's made
    fixed (merged by ``fusestatic``), damping 0.7, no joint limits."""
    from sim_pbd.scene import urdf_path

    root = ET.parse(urdf_path("baxter")).getroot()
    for link in root.findall("link"):
        for tag in ("visual", "collision"):
            for element in link.findall(tag):
                link.remove(element)
    for tag in ("gazebo", "transmission"):
        for element in root.findall(tag):
            root.remove(element)
    for joint in root.findall("joint"):
        if joint.get("type") != "fixed" and joint.get("name") not in LEFT_ARM:
            joint.set("type", "fixed")
    ET.SubElement(ET.SubElement(root, "mujoco"), "compiler", fusestatic="true",
                  discardvisual="true")
    model = mujoco.MjModel.from_xml_string(ET.tostring(root, encoding="unicode"))
    model.dof_damping[:] = DAMPING
    model.jnt_limited[:] = 0
    return model


class MuJoCo:
    """MuJoCo's forward step of the arm; one benchmark step is ``substeps`` ``mj_step``."""

    def __init__(self, mujoco, integrator: str, substeps: int):
        self.mujoco, self.substeps = mujoco, int(substeps)
        self.model = mujoco_model(mujoco)
        self.model.opt.integrator = getattr(mujoco.mjtIntegrator, f"mjINT_{integrator.upper()}")
        self.model.opt.timestep = DT / self.substeps
        self.name = f"{integrator}, {self.substeps} x {DT / self.substeps * 1e3:g} ms"
        joints = [mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_JOINT, name)
                  for name in LEFT_ARM]
        self.address = self.model.jnt_qposadr[joints]
        self.dofs = self.model.jnt_dofadr[joints]
        self.data = self._released()

    def _released(self):
        data = self.mujoco.MjData(self.model)
        data.qpos[self.address] = POSE
        self.mujoco.mj_forward(self.model, data)
        return data

    def angles(self, steps: int, action) -> np.ndarray:
        data = self._released()
        data.qfrc_applied[self.dofs] = action
        rows = [data.qpos[self.address].copy()]
        with np.errstate(all="ignore"):
            for _ in range(steps):
                for _ in range(self.substeps):
                    self.mujoco.mj_step(self.model, data)
                rows.append(data.qpos[self.address].copy())
        return np.array(rows)

    def time_forward(self, steps: int) -> float:
        step, model, data = self.mujoco.mj_step, self.model, self.data
        start = time.perf_counter()
        for _ in range(steps * self.substeps):
            step(model, data)
        return 1e3 * (time.perf_counter() - start) / steps


def matched_mujoco(mujoco, reference, expected, target: float):
    """The cheapest MuJoCo setting whose error against ``expected`` is at most ``target``
    [rad], with the settings tried and their errors."""
    tried = []
    # explicit RK4 on the stiff damped wrist blows up at the coarse steps; those candidates
    # fail on their error, so MuJoCo's instability warnings are silenced while they run
    previous = mujoco.get_mju_user_warning()
    mujoco.set_mju_user_warning(lambda message: None)
    for integrator in ("euler", "implicitfast", "rk4"):
        for substeps in (1, 2, 4, 8, 16, 32, 64):
            candidate = MuJoCo(mujoco, integrator, substeps)
            error = float(reference.angle_error(candidate.angles(len(expected) - 1, np.zeros(7)),
                                                expected).max())
            if error <= target:
                tried.append((candidate, error, min(candidate.time_forward(200)
                                                    for _ in range(3))))
                break
    mujoco.set_mju_user_warning(previous)
    if not tried:
        return None, []
    return min(tried, key=lambda t: t[2])[0], tried


def check_peer(ours: Ours, peer: Autograd, steps: int) -> None:
    """Same trajectory and same one-step VJP as sim_pbd at the paper's settings."""
    error = float(np.max(np.abs(peer.angles(steps, TORQUES) - ours.angles(steps, TORQUES))))
    verdict = "same" if error <= _TOLERANCE else "DIFFERENT"
    print(f"  trajectory, {steps} steps under constant torques: max |θ_peer - θ_sim_pbd| "
          f"{error:.1e} rad ({verdict} within {_TOLERANCE:.0e})")
    rng = np.random.default_rng(0)
    state = ours.sim.step(ours.state, TORQUES, ours.design, DT)
    seed = PBDState(*(rng.normal(size=np.shape(a)) for a in vars(state).values()))
    expected = ours.sim.step_vjp(state, TORQUES, ours.design, DT, seed)
    got = peer.vjp(state, TORQUES, seed)
    pairs = [*zip(vars(expected[0]).values(), vars(got[0]).values(), strict=True),
             (expected[1], got[1]), *((expected[2][k], got[2][k]) for k in got[2])]
    worst = max(float(np.max(np.abs(a - b)) / np.max(np.abs(a))) for a, b in pairs)
    verdict = "same" if worst <= _TOLERANCE else "DIFFERENT"
    print(f"  one-step VJP (state, torques, {len(got[2])} design parameters): max relative "
          f"difference {worst:.1e} ({verdict} within {_TOLERANCE:.0e})")


def available_peers() -> dict[str, object]:
    """Peer name -> module, or -> why it is unavailable."""
    peers: dict[str, object] = {}
    for name, module in (("autograd", "torch"), ("MuJoCo", "mujoco")):
        if importlib.util.find_spec(module) is None:
            peers[name] = f"unavailable: `{_HINT}`"
            continue
        try:
            peers[name] = __import__(module)
        except Exception as exc:  # a broken peer install must not stop the benchmark
            peers[name] = f"unavailable: {type(exc).__name__}: {exc}"
    return peers


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds")
    parser.add_argument("--check-steps", type=int, default=100)
    parser.add_argument("--threads", type=int, default=1, help="PyTorch's CPU threads")
    parser.add_argument("--memory-steps", type=int, default=10000,
                        help="steps of the memory sweep (0 skips it)")
    parser.add_argument("--substeps", type=int, help="sim_pbd's substeps (default: its "
                                                    "default)")
    parser.add_argument("--iterations", type=int, help="sim_pbd's iterations (default: its "
                                                      "default)")
    parser.add_argument("--memory-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_only:
        memory_sweep(args.memory_steps)
        return
    peers = available_peers()
    reference = load_reference()
    chosen_settings = {k: v for k, v in (("substeps", args.substeps),
                                         ("iterations", args.iterations)) if v is not None}
    impls = {"sim_pbd": Ours(**chosen_settings), "sim_pbd paper": Ours(**PAPER)}
    settings = impls["sim_pbd"].sim.settings
    print(f"Baxter left arm, dt {DT} s, float64; sim_pbd settings {settings}, paper "
          f"settings {PAPER}")
    torch = peers["autograd"]
    if isinstance(torch, str):
        print(f"  autograd peer: {torch}")
    else:
        torch.set_num_threads(args.threads)
        from peers.pbd_autograd import TorchPBD

        print(f"\n== autograd peer: PyTorch {torch.__version__}, {args.threads} thread(s), "
              "paper settings ==")
        impls["autograd"] = Autograd(torch, TorchPBD, **PAPER)
        check_peer(impls["sim_pbd paper"], impls["autograd"], args.check_steps)
    errors: dict[str, float] = {}
    mujoco = peers["MuJoCo"]
    if reference is None:
        print("  accuracy: unavailable: Pinocchio (pin) is not installed")
    else:
        arm = reference.reduced_baxter(LEFT_ARM)
        steps = int(round(HORIZON / DT))
        expected, _ = reference.release(arm, POSE, damping=DAMPING, duration=HORIZON)
        for name, impl in impls.items():
            errors[name] = float(reference.angle_error(impl.angles(steps, np.zeros(7)),
                                                       expected).max())
        if not isinstance(mujoco, str):
            print(f"\n== MuJoCo {mujoco.__version__} at matched accuracy ==")
            chosen, tried = matched_mujoco(mujoco, reference, expected, errors["sim_pbd"])
            for candidate, error, ms in tried:
                print(f"  {candidate.name:<28s} error {error:.2e} rad, {ms:.4f} ms per step")
            if chosen is None:
                print("  no MuJoCo setting tried reaches sim_pbd's accuracy")
            else:
                impls["MuJoCo"] = chosen
                errors["MuJoCo"] = dict((c.name, e) for c, e, _ in tried)[chosen.name]
                print(f"  chosen: {chosen.name} (the cheapest with error <= sim_pbd's "
                      f"{errors['sim_pbd']:.2e} rad)")
    if isinstance(mujoco, str):
        print(f"  MuJoCo: {mujoco}")
    time_all(impls, errors, args.rounds)
    if args.memory_steps > 0:
        sys.stdout.flush()
        subprocess.run([sys.executable, os.path.abspath(__file__), "--memory-only",
                        "--memory-steps", str(args.memory_steps)], check=True)


def _calls_per_round(impl, *, backward: bool, budget_ms: float = 50.0) -> tuple[int, int]:
    """(forward, forward+backward) calls that take about ``budget_ms`` each round (at least
    2), from one warm call of each: a cheap step timed over a handful of calls measures the
    caches the previous peer left cold."""
    forward = max(2, int(budget_ms / max(impl.time_forward(1), 1e-6)))
    if not backward:
        return forward, 0
    return forward, max(2, int(budget_ms / max(impl.time_backward(1), 1e-6)))


def time_all(impls: dict, errors: dict, rounds_count: int) -> None:
    """Interleaved rounds of every implementation; the table and the targets."""
    repeats = {name: _calls_per_round(impl, backward=name != "MuJoCo")
               for name, impl in impls.items()}
    rounds: dict[str, list] = {name: [] for name in impls}
    for _ in range(rounds_count):  # interleaved, so that drifting load hits everyone alike
        for name, impl in impls.items():
            forward_n, backward_n = repeats[name]
            rounds[name].append((impl.time_forward(forward_n),
                                 impl.time_backward(backward_n) if backward_n else np.nan))
    times = {name: np.array(r) for name, r in rounds.items()}
    print(f"\n== ms per step (dt {DT} s), median (best) of {rounds_count} interleaved rounds; "
          "ratio = median over rounds of that time / sim_pbd's (same settings for the "
          "autograd peer: paper; MuJoCo: sim_pbd's) ==")
    print(f"  {'':<14s} {'step ms':>18s} {'step+VJP ms':>18s} {'F ratio':>9s} "
          f"{'F+B ratio':>9s} {'0.25 s error rad':>17s}")
    for name, t in times.items():
        base = times["sim_pbd paper" if name == "autograd" else "sim_pbd"]
        (f, b), (bf, bb) = np.median(t, axis=0), np.min(t, axis=0)
        rf, rb = np.median(t / base, axis=0)
        error = f"{errors[name]:.2e}" if name in errors else "-"
        print(f"  {name:<14s} {f:9.4f} ({bf:7.4f}) {b:9.3f} ({bb:7.3f}) {rf:9.4g} "
              f"{rb:9.4g} {error:>17s}")
    if "autograd" in times:
        ratio = np.median(times["autograd"] / times["sim_pbd paper"], axis=0)
        met = bool(np.all(ratio >= _TARGETS["autograd"]))
        print(f"  target: forward and forward+backward >= {_TARGETS['autograd']:g}x the "
              f"autograd peer (paper settings): {'met' if met else 'NOT met'} "
              f"({ratio[0]:.3g}x, {ratio[1]:.3g}x)")
    if "MuJoCo" in times:
        ratio = float(np.median(times["MuJoCo"][:, 0] / times["sim_pbd"][:, 0]))
        met = ratio >= _TARGETS["MuJoCo"]
        print(f"  target: forward within 2x of MuJoCo's step at matched accuracy: "
              f"{'met' if met else 'NOT met'} (sim_pbd takes {1 / ratio:.3g}x MuJoCo's time)")


def memory_sweep(steps: int) -> None:
    """Peak memory of one checkpointed reverse sweep of ``steps`` steps (default settings)."""
    from codesign import Objective, OpenLoopController, Rollout
    from codesign.terms import TrajectoryTracking
    from sim_pbd.terms import JointObserver

    sim = simulator()
    design = sim.design_space().defaults()
    controller = OpenLoopController(observation_size=0, action_size=7, control_steps=steps)
    rollout = Rollout(sim, controller=controller, steps=steps, dt=DT)
    observer = JointObserver(simulator=sim)
    targets = np.full((steps + 1, observer.size), np.nan)
    targets[-1] = 0.0  # the final joint state's squared norm
    objective = Objective.of(TrajectoryTracking(observer=observer, targets=targets))
    weights = controller.parameter_space().defaults()
    state_kb = sum(np.asarray(a).nbytes for a in vars(sim.initial_state(design)).values()) / 1024
    before = peak_rss_mib()
    tracemalloc.start()
    start = time.perf_counter()
    result, (gradient,) = rollout.value_and_grad(design, weights, objective)
    seconds = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss = peak_rss_mib()
    print(f"\n== memory: reverse sweep of {steps} steps ({steps * DT:g} s), default settings ==")
    print(f"  checkpoint interval {rollout.checkpoint_every}, at most {result.peak_states_held} "
          f"states held ({state_kb:.2f} KiB each)")
    print(f"  peak traced NumPy memory {peak / 2**20:.1f} MiB, max RSS {rss:.0f} MiB "
          f"({before:.0f} MiB before the sweep: the imports), {seconds:.0f} s")
    norm = float(np.linalg.norm(gradient.weights["table"]))
    print(f"  |d(final joint state²)/d(torques)| {norm:.3e}")


if __name__ == "__main__":
    main()
