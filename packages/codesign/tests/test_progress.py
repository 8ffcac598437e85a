"""Progress: a redrawn bar on a terminal, plain lines every few seconds in a log."""

from __future__ import annotations

import io

from codesign.progress import LINE_INTERVAL_S, ProgressDisplay, progress_display


class FakeTerminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


class FakeClock:
    """A clock the test advances by hand [s]."""

    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_log_gets_a_plain_line_every_few_seconds_and_one_at_the_end():
    stream, clock = io.StringIO(), FakeClock()
    with progress_display(stream, total=12, desc="walker", clock=clock, interval_s=5.0) as shown:
        for iteration in range(1, 13):
            clock.now += 1.5  # one iteration every 1.5 s: a line after 4, 8 and 12 iterations
            shown.update(iteration, 1.0 / iteration)
        clock.now += 0.5
    assert "\r" not in stream.getvalue()
    assert stream.getvalue().splitlines() == [
        "walker: 4/12 it, loss=0.25, 6.0 s",
        "walker: 8/12 it, loss=0.125, 12.0 s",
        "walker: 12/12 it, loss=0.0833333, 18.0 s",
    ]


def test_the_last_iteration_is_printed_when_the_run_ends_between_lines():
    stream, clock = io.StringIO(), FakeClock()
    with progress_display(stream, total=10, desc="arm", clock=clock) as shown:
        clock.now += LINE_INTERVAL_S / 2
        shown.update(1, 3.0)
        clock.now += LINE_INTERVAL_S / 4
        shown.update(2, 2.0)  # the optimizer stops early (converged)
    assert stream.getvalue() == f"arm: 2/10 it, loss=2, {0.75 * LINE_INTERVAL_S:.1f} s\n"


def test_nothing_is_printed_without_an_iteration():
    stream = io.StringIO()
    with progress_display(stream, total=3, desc="x", clock=FakeClock()):
        pass
    assert stream.getvalue() == ""


def test_a_terminal_gets_a_bar_redrawn_in_place():
    stream = FakeTerminal()
    with progress_display(stream, total=4, desc="walker") as shown:
        for iteration in range(1, 5):
            shown.update(iteration, 0.5)
    text = stream.getvalue()
    assert text.count("\r") >= 4  # redrawn in place, not one line each
    assert "4/4" in text and "loss=0.5" in text


def test_progress_off_shows_nothing():
    for stream in (io.StringIO(), FakeTerminal()):
        shown = progress_display(stream, total=4, desc="x", enabled=False)
        assert type(shown) is ProgressDisplay
        with shown:
            shown.update(1, 1.0)
        assert stream.getvalue() == ""


def test_a_stream_without_isatty_counts_as_a_log():
    class Sink:
        def __init__(self):
            self.parts = []

        def write(self, text):
            self.parts.append(text)

        def flush(self):
            pass

    sink, clock = Sink(), FakeClock()
    with progress_display(sink, total=1, desc="x", clock=clock) as shown:
        shown.update(1, 4.0)
    assert sink.parts == ["x: 1/1 it, loss=4, 0.0 s\n"]


def test_tasks_of_a_batch_show_in_the_log_lines_and_count_over_batches():
    stream, clock = io.StringIO(), FakeClock()
    with progress_display(stream, total=2, desc="vine", clock=clock, interval_s=5.0) as shown:
        for done in range(1, 5):  # the first batch, before any iteration ended
            clock.now += 2.0
            shown.tasks(done, 4)
        shown.update(1, 0.5)
        shown.tasks(1, 4)
    assert (shown.batch, shown.tasks_done) == ((1, 4), 5)
    assert stream.getvalue().splitlines() == [
        "vine: 0/2 it, tasks 3/4, 3 done, 6.0 s",
        "vine: 1/2 it, loss=0.5, tasks 1/4, 5 done, 8.0 s",
    ]


def test_a_terminal_bar_shows_the_tasks_of_the_running_batch():
    stream = FakeTerminal()
    with progress_display(stream, total=4, desc="walker") as shown:
        shown.update(1, 0.5)
        shown.tasks(7, 32)
    assert "tasks=7/32, 1 done" in stream.getvalue()
