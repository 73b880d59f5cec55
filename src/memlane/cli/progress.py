"""Progress of long commands, on stderr so --json output on stdout stays clean.

On a terminal: a live rich bar or spinner. Otherwise (a pipe, a log file, CI) the live
display would print nothing at all, so the same updates come out as plain, throttled lines.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from memlane.cli.common import err_console

#: (what, done, total): the callback long operations take; total 0 means unknown
Update = Callable[[str, int, int], None]

PLAIN_EVERY_S = 10.0  # with no 10% step passed, a plain line at least this often


def _line(text: str) -> None:
    err_console.print(text, markup=False, highlight=False)


class PlainLines:
    """Progress as lines: at each new phase, every 10%, at the end, and every 10 s meanwhile."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[int, float]] = {}  # what -> (tenth printed, when)

    def __call__(self, what: str, done: int, total: int) -> None:
        now = time.monotonic()
        finished = bool(total) and done >= total
        tenth = 10 if finished else (done * 10 // total if total else -1)
        seen = self._last.get(what)
        if seen is not None and tenth == seen[0] and (finished or now - seen[1] < PLAIN_EVERY_S):
            return
        self._last[what] = (tenth, now)
        _line(f"{what}: {done:,}/{total:,} ({100 * done // total}%)" if total else f"{what}: {done:,}")


@contextmanager
def progress_bar(*, keep: bool = False) -> Iterator[Update]:
    """Yields a callback (what, done, total): one bar per ``what`` on a terminal, else lines."""
    if not err_console.is_terminal:
        yield PlainLines()
        return
    bar = Progress(
        TextColumn("{task.description:<10}"), BarColumn(), MofNCompleteColumn(),
        TimeElapsedColumn(), TimeRemainingColumn(), console=err_console, transient=not keep,
    )
    tasks: dict[str, TaskID] = {}

    def update(what: str, done: int, total: int) -> None:
        if what not in tasks:
            tasks[what] = bar.add_task(what, total=total or None)
        bar.update(tasks[what], completed=done, total=total or None)

    with bar:
        yield update


@contextmanager
def status(message: str) -> Iterator[Callable[[str], None]]:
    """Yields a callback (message): a spinner with the latest one on a terminal, else one line each."""
    if not err_console.is_terminal:
        _line(message)
        yield _line
        return
    with err_console.status(message) as spinner:
        yield lambda text: spinner.update(text)
