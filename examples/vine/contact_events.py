"""The package README's table of how gradients behave at contact events.

Usage: ``python examples/vine/contact_events.py [--smoothing 0 1e-7 1e-6 1e-5]``

For hard contact and each contact smoothing κ [J], a 20-body vine slides through the
``cluttered`` scene for 250 steps of 10 ms (:class:`sim_vine.contact_events.SlidingTrajectory`);
the row gives the derivative of its keypoint loss in the relative change of the tied K, C
and μ by the adjoint (``step_vjp``) and by central differences at relative steps 1e-1 …
1e-5 (:func:`sim_vine.contact_events.contact_event_rows`).
"""

from __future__ import annotations

import argparse

from sim_vine.contact_events import NAMES, RELATIVE_STEPS, contact_event_rows

LABELS = {"joint.stiffness": "K", "joint.damping": "C", "contact.friction": "μ"}


def _number(value: float) -> str:
    return f"{value:+.3g}".replace("-", "−")


def main() -> None:
    """Print the table as Markdown rows."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoothing", type=float, nargs="+", default=[0.0, 1e-7, 1e-6, 1e-5],
                        help="contact smoothing κ [J] per row (0: hard contact)")
    args = parser.parse_args()
    steps = ", ".join(f"{h:g}" for h in RELATIVE_STEPS)
    print(f"VJP / central differences at relative steps {steps}")
    print("| contact | " + " | ".join(f"{LABELS[n]}: VJP / FD" for n in NAMES) + " |")
    print("|---|" + "---|" * len(NAMES))
    for row in contact_event_rows(args.smoothing):
        kappa = row["contact_smoothing"]
        cells = [f"{_number(row['gradient'][name])} / "
                 + ", ".join(_number(v) for v in row["differences"][name]) for name in NAMES]
        print(f"| {'hard' if kappa == 0 else f'κ {kappa:g} J'} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
