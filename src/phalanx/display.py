"""How Phalanx's objects show themselves: HTML tables in a notebook, rich text in a terminal,
and progress while a client waits.

``Table`` is the one shape: the SDK's objects (a job, its record, a Ray cluster, a list of
jobs) build one, and its ``_repr_html_`` (Jupyter) and ``__rich__`` (rich's console) draw
it. Every cell is escaped in HTML: names, messages and commands are written by users.

Rich is imported only inside the functions that draw with it: ``__rich__`` is only called
by rich itself (so rich is loaded already), and a terminal progress bar only when one is
shown. The SDK stays light (``.importlinter`` names this exception).
"""

from __future__ import annotations

import html
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

STYLE = ("border-collapse:collapse;font-family:var(--jp-code-font-family,monospace);"
         "font-size:12px")
CELL = "padding:2px 8px;text-align:left;border-bottom:1px solid #ddd"


@dataclass
class Table:
    """A titled table of text cells; ``rows`` may be empty (then it says so)."""

    title: str
    columns: Sequence[str]
    rows: list[Sequence[str]] = field(default_factory=list)
    empty: str = "none"

    def _repr_html_(self) -> str:
        head = "".join(f'<th style="{CELL}">{html.escape(c)}</th>' for c in self.columns)
        body = "".join(
            "<tr>" + "".join(f'<td style="{CELL}">{html.escape(str(v))}</td>' for v in row)
            + "</tr>" for row in self.rows)
        if not self.rows:
            body = (f'<tr><td style="{CELL}" colspan="{len(self.columns)}">'
                    f"<i>{html.escape(self.empty)}</i></td></tr>")
        return (f'<table class="phalanx" style="{STYLE}"><caption style="text-align:left">'
                f"<b>{html.escape(self.title)}</b></caption><thead><tr>{head}</tr></thead>"
                f"<tbody>{body}</tbody></table>")

    def __rich__(self) -> Any:
        from rich.table import Table as RichTable  # only rich calls this: it is loaded

        table = RichTable(title=self.title, title_justify="left", caption=(
            self.empty if not self.rows else None))
        for column in self.columns:
            table.add_column(column, overflow="fold")
        for row in self.rows:
            table.add_row(*(_plain(str(v)) for v in row))
        return table

    def __str__(self) -> str:
        lines = [self.title, "  ".join(self.columns)]
        lines += ["  ".join(str(v) for v in row) for row in self.rows] or [self.empty]
        return "\n".join(lines)


class Listing(list[T]):
    """A query's results: a plain list that draws itself as a table."""

    def __init__(self, items: Iterable[T], table: Callable[[Sequence[T]], Table]) -> None:
        super().__init__(items)
        self._table = table

    def table(self) -> Table:
        return self._table(self)

    def _repr_html_(self) -> str:
        return self.table()._repr_html_()

    def __rich__(self) -> Any:
        return self.table().__rich__()


def fields_table(title: str, fields: Sequence[tuple[str, str]]) -> Table:
    """One object as a two-column table of its fields."""
    return Table(title, ("field", "value"), [list(f) for f in fields])


def _plain(text: str) -> Any:
    from rich.text import Text  # no markup: user-written text is shown as written

    return Text(text)


def when(epoch: float | None) -> str:
    """A time as a table shows it (local time, to the second), or "-"."""
    if epoch is None:
        return "-"
    return datetime.fromtimestamp(epoch, UTC).astimezone().strftime("%Y-%m-%d %H:%M:%S")


# ---------------------------------------------------------------------------- progress
class Reporter(Protocol):
    def __call__(self, state: str, done: int, total: int) -> None: ...


def in_notebook() -> bool:
    """Whether this runs in a Jupyter kernel (where output goes to a notebook)."""
    if "ipykernel" not in sys.modules:
        return False
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def _progress_html(title: str, state: str, done: int, total: int) -> str:
    return (f'<div class="phalanx-progress"><b>{html.escape(title)}</b> '
            f'<progress value="{done}" max="{max(total, 1)}"></progress> '
            f"{done}/{total} &middot; {html.escape(state)}</div>")


@contextmanager
def progress(title: str, enabled: bool = True) -> Iterator[Reporter]:
    """A progress display for a wait: a bar updated in place in a notebook, rich's bar in a
    terminal, nothing elsewhere (a script's log, a test). Yields ``report(state, done,
    total)``."""
    if not enabled:
        yield lambda state, done, total: None
    elif in_notebook():
        from IPython.display import HTML, display

        handle = display(HTML(_progress_html(title, "…", 0, 0)), display_id=True)
        shown: list[tuple[str, int, int]] = []

        def report(state: str, done: int, total: int) -> None:
            if handle is not None and (not shown or shown[-1] != (state, done, total)):
                shown.append((state, done, total))
                handle.update(HTML(_progress_html(title, state, done, total)))

        yield report
    elif sys.stderr.isatty():
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        with Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                      MofNCompleteColumn(), TextColumn("{task.fields[state]}", markup=False),
                      console=Console(stderr=True), transient=False) as bar:
            task = bar.add_task(title, total=None, state="")

            def report(state: str, done: int, total: int) -> None:
                bar.update(task, completed=done, total=total or None, state=state)

            yield report
    else:
        yield lambda state, done, total: None
