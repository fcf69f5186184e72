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
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, ParamSpec, TextIO, TypeVar

import typer

from phalanx.errors import Conflict, NotFound, PayloadTooLarge, PhalanxError, SpecError

if TYPE_CHECKING:
    from rich.console import Console

STDIN = "-"  # as a file name (`-f -`): standard input, as kubectl reads it

# Output piped to a file or another program is not cut to 80 columns: scripts grep it.
PIPED_WIDTH = 1000


def _width(stream: TextIO) -> int | None:
    piped = not stream.isatty() and "COLUMNS" not in os.environ
    return PIPED_WIDTH if piped else None


# C0 controls but newline and tab, DEL, C1 controls, and the bidirectional overrides that
# reorder what a terminal shows.
CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_controls(text: str) -> str:
    """``text`` with its control characters written as escapes (``\\x1b``), shown not obeyed."""
    return CONTROLS.sub(_escaped, text)


def _console(stream: TextIO) -> Console:
    from phalanx.cli.consoles import SafeConsole  # rich: only a verb that draws loads it

    return SafeConsole(stderr=stream is sys.stderr, highlight=False, width=_width(stream))


@functools.cache
def _errors() -> Console:
    return _console(sys.stderr)


def __getattr__(name: str) -> Any:
    # ``err``, the console for everything but results (on stderr), made on first use: a
    # verb that prints only plain lines (``version``) never loads rich.
    if name == "err":
        return _errors()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def out() -> Console:
    """The console for results, sized for the terminal or unbounded when piped."""
    return _console(sys.stdout)


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
    from rich.text import Text

    where = f"{exc.field}: " if exc.field else ""
    err = _errors()
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
    from rich.text import Text

    _errors().print(Text(message, style=style))


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
