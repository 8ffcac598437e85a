"""Joint state in -> torque out latency across two processes: the ``impedance_controller``
node (ros_bridge's, the code a robot runs) against a timer-driven JointState publisher.

    .venv-ros/bin/python benchmarks/ros_loop.py [--rates 100 500 1000] [--triggers timer state]
        [--seconds 5] [--warmup 1] [--runs 1] [--fifo PRIORITY] [--domain N]
        [--controller-args -p name:=value ...]

Needs rclpy: run it with the ROS environment's Python (.venv-ros: ``UV_PROJECT_ENVIRONMENT=
.venv-ros uv sync --package ros_bridge --extra ros --extra test --locked``). This process
publishes ``sensor_msgs/JointState`` on /joint_states at each rate (stamp = send time) and
subscribes to the controller's effort commands (``std_msgs/Float64MultiArray`` on
/effort_controller/commands); the controller is a second process, started per rate and
trigger with ``rate:=`` that rate and ``trigger:=`` ``timer`` (a command every period) or
``state`` (one per joint state), on loopback (``ROS_LOCALHOST_ONLY=1``) in a DDS domain of
its own. Both processes use rclpy's SingleThreadedExecutor.

Matching a command to the joint state it answers: the k-th joint state puts the shoulder at
``goal - k * STEP`` at rest, so PD alone (no model) commands ``K * k * STEP``, from which the
command's k is read back (the elbow sits at its goal). The controller runs unmodified, with
its limits and watchdog. The latency of state k is the first command carrying k minus the
time just before state k was published, both on this process's monotonic clock: it
includes publishing, DDS on loopback both ways, both executors and the controller's cycle.

Printed per rate: latency p50 / p99 / max [ms] over the states sent in the measured window,
states never answered (dropped: a newer state replaced it before the controller's tick),
answers later than one period (late), zero commands (the watchdog or another guard), and
the controller process's CPU share (utime + stime from /proc/<pid>/stat over the window, %
of one core); then the verdict on the target, p99 <= 1 ms at 500 Hz, per trigger.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
import time
from importlib.resources import files
from pathlib import Path

import numpy as np
import rclpy
from rclpy.executors import SingleThreadedExecutor

from ros_bridge.messages import FLOAT64_ARRAY, JOINT_STATE
from ros_bridge.nodes.impedance_controller import TRIGGERS
from ros_bridge.rclpy_adapter import rclpy_class

JOINTS = ["shoulder", "elbow"]
GOAL_Q = np.array([-1.2, 0.3])
STIFFNESS = np.array([30.0, 10.0])
STEP = 1e-6  # [rad] per joint state: 1e5 states span 0.1 rad and 3 N m, far from limits
TARGET_RATE, TARGET_P99_MS = 500.0, 1.0
URDF = str(files("ros_bridge.data") / "two_link_arm.urdf")


@dataclasses.dataclass(frozen=True)
class LoopResult:
    """One rate's measurement; latencies [s] of the answered states, in send order."""

    rate: float
    trigger: str
    latency: np.ndarray
    sent: int
    dropped: int
    late: int
    zero_commands: int
    controller_cpu: float  # share of one core over the window


def controller_process(rate: float, trigger: str, domain: int,
                       extra: list[str]) -> subprocess.Popen:
    """``impedance_controller`` at ``rate`` [Hz] with ``trigger``, PD alone, in DDS domain
    ``domain``."""
    def array(values):
        return "[" + ",".join(repr(float(v)) for v in values) + "]"  # DOUBLE_ARRAY

    parameters = [f"joints:=[{','.join(JOINTS)}]", f"urdf:={URDF}", f"rate:={rate}",
                  f"trigger:={trigger}",
                  f"stiffness:={array(STIFFNESS)}", "damping:=[3.0,0.5]",
                  f"goal_q:={array(GOAL_Q)}", *extra]
    script = Path(sys.executable).parent / "impedance_controller"
    return subprocess.Popen([str(script), "--ros-args",
                             *[a for p in parameters for a in ("-p", p)]],
                            env=dict(os.environ, ROS_DOMAIN_ID=str(domain)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time [s] of process ``pid`` so far (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Probe:
    """This process's side: joint states out at ``rate``, commands in, both timed."""

    def __init__(self, context, rate: float):
        self.node = rclpy.create_node("ros_loop_probe", context=context)
        self.joint_state = rclpy_class(JOINT_STATE)
        self.publisher = self.node.create_publisher(self.joint_state, "/joint_states", 10)
        self.node.create_subscription(rclpy_class(FLOAT64_ARRAY),
                                      "/effort_controller/commands", self._arrive, 10)
        self.sent_ns: list[int] = []  # index k - 1: when state k was published
        self.arrivals: list[tuple[int, float]] = []  # (monotonic ns, shoulder torque)
        self.node.create_timer(1.0 / rate, self._send)

    def _send(self) -> None:
        k = len(self.sent_ns) + 1
        message = self.joint_state()
        message.name = JOINTS
        message.position = [GOAL_Q[0] - k * STEP, GOAL_Q[1]]
        message.velocity = [0.0, 0.0]
        message.effort = [0.0, 0.0]
        now = time.monotonic_ns()
        message.header.stamp.sec, message.header.stamp.nanosec = divmod(now, 10**9)
        self.sent_ns.append(now)
        self.publisher.publish(message)

    def _arrive(self, message) -> None:
        self.arrivals.append((time.monotonic_ns(), message.data[0]))


def answered_state(torque: np.ndarray) -> np.ndarray:
    """The joint state k that each shoulder torque [N m] answers; 0 for zero torque, -1 for
    a torque that is no k (a limit acted)."""
    k = torque / STIFFNESS[0] / STEP
    index = np.rint(k)
    return np.where(np.abs(k - index) < 1e-3, index, -1).astype(np.int64)


def measure(rate: float, trigger: str, *, seconds: float, warmup: float, domain: int,
            controller_args: list[str]) -> LoopResult:
    """Start the controller, wait for its first torque, warm up, measure ``seconds``."""
    controller = controller_process(rate, trigger, domain, controller_args)
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=domain)
    try:
        probe = Probe(context, rate)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(probe.node)

        def spin_until(done, limit):
            deadline = time.monotonic() + limit
            while not done() and time.monotonic() < deadline:
                executor.spin_once(timeout_sec=0.01)
                if controller.poll() is not None:
                    raise RuntimeError(f"the controller exited with {controller.returncode}")
            return done()

        if not spin_until(lambda: any(t != 0 for _, t in probe.arrivals), 30.0):
            raise RuntimeError("no torque from the controller within 30 s (discovery?)")
        spin_until(lambda: False, warmup)
        first, cpu0, wall0 = len(probe.sent_ns) + 1, cpu_seconds(controller.pid), time.monotonic()
        spin_until(lambda: False, seconds)
        last, cpu1, wall1 = len(probe.sent_ns), cpu_seconds(controller.pid), time.monotonic()
        spin_until(lambda: False, 0.2)  # answers to the window's last states
        executor.shutdown()
    finally:
        controller.terminate()  # SIGTERM: the node publishes zero torque and exits
        try:
            controller.wait(10)
        except subprocess.TimeoutExpired:
            controller.kill()
            controller.wait()
        rclpy.try_shutdown(context=context)
    return summarize(rate, trigger, probe, first, last, (cpu1 - cpu0) / (wall1 - wall0))


def summarize(rate: float, trigger: str, probe: Probe, first: int, last: int,
              controller_cpu: float) -> LoopResult:
    """Latencies of states ``first..last`` from the probe's records."""
    arrived_ns = np.array([t for t, _ in probe.arrivals], dtype=np.int64)
    k = answered_state(np.array([torque for _, torque in probe.arrivals]))
    window = (k >= first) & (k <= last)
    first_seen = {}
    for state, t in zip(k[window], arrived_ns[window], strict=True):
        first_seen.setdefault(int(state), int(t))
    sent_ns = np.array(probe.sent_ns, dtype=np.int64)
    answered = np.array(sorted(first_seen), dtype=np.int64)
    latency = (np.array([first_seen[s] for s in answered], dtype=np.int64)
               - sent_ns[answered - 1]) * 1e-9
    in_window = (arrived_ns >= sent_ns[first - 1]) & (arrived_ns <= sent_ns[last - 1])
    return LoopResult(rate=rate, trigger=trigger, latency=latency, sent=last - first + 1,
                      dropped=last - first + 1 - len(answered),
                      late=int(np.sum(latency > 1.0 / rate)),
                      zero_commands=int(np.sum(k[in_window] == 0)),
                      controller_cpu=controller_cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", type=float, nargs="+", default=[100.0, 500.0, 1000.0])
    parser.add_argument("--triggers", nargs="+", default=list(TRIGGERS), choices=TRIGGERS,
                        help="the controller's trigger parameter")
    parser.add_argument("--seconds", type=float, default=5.0, help="measured window per rate")
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--runs", type=int, default=1, help="repeat each rate")
    parser.add_argument("--domain", type=int, default=78 + os.getpid() % 23,
                        help="DDS domain id (default: 78-100 by pid; the tests use 73-77)")
    parser.add_argument("--fifo", type=int, default=0, metavar="PRIORITY",
                        help="run both processes (and their DDS threads) under SCHED_FIFO at "
                             "this priority, as a real-time controller would (needs "
                             "CAP_SYS_NICE); 0: the default scheduler")
    parser.add_argument("--controller-args", nargs=argparse.REMAINDER, default=[],
                        help="more controller parameters, e.g. -p torque_rate:=2.0")
    args = parser.parse_args()
    os.environ["ROS_LOCALHOST_ONLY"] = "1"
    if args.fifo:  # before any thread exists: DDS's threads and the controller inherit it
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(args.fifo))
    extra = [a for a in args.controller_args if a != "-p"]
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, {os.cpu_count()} CPUs, "
          f"domain {args.domain}, {args.seconds:g} s per rate after {args.warmup:g} s, "
          + (f"SCHED_FIFO {args.fifo}" if args.fifo else "default scheduler"))
    print(f"{'trigger':>7} {'rate Hz':>8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} "
          f"{'sent':>6} {'dropped':>8} {'late':>6} {'zero':>6} {'ctrl CPU':>9}")
    results = []
    for trigger in args.triggers:
        for rate in args.rates:
            for _ in range(args.runs):
                r = measure(rate, trigger, seconds=args.seconds, warmup=args.warmup,
                            domain=args.domain, controller_args=extra)
                results.append(r)
                p50, p99, worst = (np.percentile(r.latency, [50, 99, 100]) * 1e3
                                   if r.latency.size else (np.nan,) * 3)
                print(f"{trigger:>7} {rate:8g} {p50:8.3f} {p99:8.3f} {worst:8.3f} "
                      f"{r.sent:6d} {r.dropped:8d} {r.late:6d} {r.zero_commands:6d} "
                      f"{100 * r.controller_cpu:8.1f}%", flush=True)
    for trigger in args.triggers:
        at_target = [r for r in results if r.rate == TARGET_RATE and r.trigger == trigger]
        if at_target:
            worst_p99 = max(np.percentile(r.latency, 99) * 1e3 for r in at_target)
            verdict = "met" if worst_p99 <= TARGET_P99_MS else "MISSED"
            print(f"target p99 <= {TARGET_P99_MS:g} ms at {TARGET_RATE:g} Hz, trigger "
                  f"{trigger}: {verdict} (worst p99 {worst_p99:.3f} ms of {len(at_target)} "
                  "run(s))")


if __name__ == "__main__":
    main()
