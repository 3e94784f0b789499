"""The one progress renderer of the command line: a bar on a terminal, one line per new
message elsewhere (a log keeps the steps, not the redraws)."""

from __future__ import annotations

import sys
from collections.abc import Callable


def progress(label: str) -> Callable[[str, float], None]:
    last = [""]

    def show(message: str, fraction: float) -> None:
        width = 30
        done = int(max(0.0, min(fraction, 1.0)) * width)
        line = f"{label} [{'#' * done}{'.' * (width - done)}] {fraction:4.0%} {message}"
        if sys.stderr.isatty():
            sys.stderr.write("\r" + line.ljust(len(last[0])))
            if fraction >= 1.0:
                sys.stderr.write("\n")
        elif message != last[0]:
            sys.stderr.write(line + "\n")
        last[0] = line if sys.stderr.isatty() else message
        sys.stderr.flush()

    return show


def progress_bar(label: str) -> Callable[[float], None]:
    """The same bar for work that reports only how far it is (no message), on a terminal only."""
    show = progress(label)

    def fraction_only(fraction: float) -> None:
        if sys.stderr.isatty():
            show("", fraction)

    return fraction_only
