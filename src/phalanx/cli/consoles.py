"""The rich console the CLI draws with (``output.out()`` and ``output.err``), in a module
of its own so that a verb that prints plain lines never loads rich."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.text import Text

from phalanx.cli.output import CONTROLS, escape_controls


class SafeConsole(Console):
    """A console that escapes control characters in whatever it prints: strings as they
    become text (so tables measure the escapes), and every segment of text on its way out
    (``Text`` objects built elsewhere). Its own styling is not text, and stays."""

    def render_str(self, text: str, **options: Any) -> Text:
        return super().render_str(escape_controls(text), **options)

    def render(self, renderable: RenderableType,
               options: ConsoleOptions | None = None) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            if segment.control is None and CONTROLS.search(segment.text):
                yield Segment(escape_controls(segment.text), segment.style)
            else:
                yield segment
