"""Where the CLI writes: results on stdout, everything else (progress, errors) on stderr.

Keeping stdout for results is what lets scripts do ``name=$(phalanx submit -f x.yaml)``
and ``phalanx jobs --json | jq``.

Both consoles show control characters as escapes (``\\x1b``): tables and ``describe``
print what users wrote (key descriptions, job labels, env, messages), and a user's text
must not drive the reader's terminal (set its title, clear it, fake a line).
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NoReturn, ParamSpec, TextIO, TypeVar

import typer
from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.text import Text

from phalanx.errors import Conflict, NotFound, PayloadTooLarge, PhalanxError, SpecError

STDIN = "-"  # as a file name (`-f -`): standard input, as kubectl reads it

# Output piped to a file or another program is not cut to 80 columns: scripts grep it.
PIPED_WIDTH = 1000


def _width(stream: TextIO) -> int | None:
    piped = not stream.isatty() and "COLUMNS" not in os.environ
    return PIPED_WIDTH if piped else None


# C0 controls but newline and tab, DEL, C1 controls, and the bidirectional overrides that
# reorder what a terminal shows.
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_controls(text: str) -> str:
    """``text`` with its control characters written as escapes (``\\x1b``), shown not obeyed."""
    return _CONTROLS.sub(_escaped, text)


class SafeConsole(Console):
    """A console that escapes control characters in whatever it prints: strings as they
    become text (so tables measure the escapes), and every segment of text on its way out
    (``Text`` objects built elsewhere). Its own styling is not text, and stays."""

    def render_str(self, text: str, **options: Any) -> Text:
        return super().render_str(escape_controls(text), **options)

    def render(self, renderable: RenderableType,
               options: ConsoleOptions | None = None) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            if segment.control is None and _CONTROLS.search(segment.text):
                yield Segment(escape_controls(segment.text), segment.style)
            else:
                yield segment


err = SafeConsole(stderr=True, highlight=False, width=_width(sys.stderr))


def out() -> Console:
    """The console for results, sized for the terminal or unbounded when piped."""
    return SafeConsole(highlight=False, width=_width(sys.stdout))

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


def input_dir(path: Path) -> Path:
    """What a relative path in ``-f FILE`` (a job's workdir) is relative to: the file's
    directory; for standard input the current one."""
    return Path.cwd() if str(path) == STDIN else path.expanduser().resolve().parent


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
