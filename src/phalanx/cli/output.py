"""Where the CLI writes: results on stdout, everything else (progress, errors) on stderr.

Keeping stdout for results is what lets scripts do ``name=$(phalanx submit -f x.yaml)``
and ``phalanx jobs --json | jq``.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, ParamSpec, TextIO, TypeVar

import typer
from rich.console import Console
from rich.text import Text

from phalanx.errors import Conflict, NotFound, PayloadTooLarge, PhalanxError, SpecError

STDIN = "-"  # as a file name (`-f -`): standard input, as kubectl reads it

# Output piped to a file or another program is not cut to 80 columns: scripts grep it.
PIPED_WIDTH = 1000


def _width(stream: TextIO) -> int | None:
    piped = not stream.isatty() and "COLUMNS" not in os.environ
    return PIPED_WIDTH if piped else None


err = Console(stderr=True, highlight=False, width=_width(sys.stderr))


def out() -> Console:
    """The console for results, sized for the terminal or unbounded when piped."""
    return Console(highlight=False, width=_width(sys.stdout))

EXIT_OK = 0
EXIT_FAILED = 1  # a job that failed, or the server could not be reached or broke
EXIT_BAD_INPUT = 2  # the user's input was wrong; nothing was sent or changed

ERROR_PREFIX = "error: "
FIX_PREFIX = "fix: "

_BAD_INPUT = (SpecError, Conflict, NotFound, PayloadTooLarge)


def exit_code_for(exc: PhalanxError) -> int:
    return EXIT_BAD_INPUT if isinstance(exc, _BAD_INPUT) else EXIT_FAILED


def print_error(exc: PhalanxError) -> None:
    """One red line naming the field and the problem, and the fix on the next."""
    where = f"{exc.field}: " if exc.field else ""
    err.print(Text(f"{ERROR_PREFIX}{where}{exc.message}", style="bold red"))
    if exc.fix:
        err.print(Text(f"  {FIX_PREFIX}{exc.fix}", style="red"))


def fail(exc: PhalanxError) -> NoReturn:
    print_error(exc)
    raise typer.Exit(exit_code_for(exc))


def read_input(path: Path) -> tuple[str, str]:
    """The text of ``-f FILE`` (``-``: standard input) and the name its errors give it."""
    if str(path) == STDIN:
        return sys.stdin.read(), "<stdin>"
    from phalanx.sdk.documents import read_text  # it loads every spec model; few verbs read

    return read_text(path), str(path)


def print_json(data: Any) -> None:
    """Pure JSON on stdout, nothing else, for scripts."""
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False) + "\n")
    sys.stdout.flush()


def write_line(line: str) -> None:
    """One result line on stdout, flushed at once (a script may be waiting for it)."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def note(message: str, style: str = "") -> None:
    """A human remark on stderr (never mixed into results)."""
    err.print(Text(message, style=style))


P = ParamSpec("P")
R = TypeVar("R")


def reports_errors(command: Callable[P, R]) -> Callable[P, R]:
    """Print PhalanxErrors as one red sentence with the fix, and exit with their code."""

    @functools.wraps(command)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except PhalanxError as exc:
            fail(exc)
        except KeyboardInterrupt:
            raise typer.Exit(130) from None

    return run
