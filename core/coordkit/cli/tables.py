"""Tables that fit the terminal they are printed on, and never cut a number or a name.

A :class:`FittedTable` is columns (a header, a :class:`Kind`, an optional abbreviation) and rows of
cells. A cell is plain text, shown as it is with control characters made visible (never read as
rich markup: names and values come from users and stores), or a rich ``Text`` for a styled value
of coordkit's own. At render time it takes the first layout that fits the width it is given:

1. a table with the full headers;
2. the same table with the abbreviated headers, and a legend below it;
3. several tables, each of the key columns and as many of the others as fit (legend below);
4. stacked: each row a block of ``header  value`` lines under the row's key.

Numbers and names (``NUMBER``, ``NAME``) are never wrapped or cut in a table; ``TEXT`` (partition
lists, descriptions) wraps after commas and at spaces (:class:`Breakable`), so a list breaks
between its numbers and names, and folds only a part wider than its column. In the stacked layout
every value gets the width of the line. Commands get their console from :func:`output_console`.
"""

from __future__ import annotations

import enum
import itertools
import os
import re
from collections.abc import Iterable, Sequence

from attrs import field, frozen
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from coordkit.store.paths import numeric_name
from coordkit.support.terminal import plain

Cell = str | Text

#: The narrowest a TEXT column is made: its longest unbreakable part (a name in a list), up to
#: this; a longer part is folded.
TEXT_MIN_WIDTH = 40
#: The widest and tallest terminal believed from ``COLUMNS`` / ``LINES``.
MAX_TERMINAL_SIZE = 10_000


def output_console(*, width_when_not_a_terminal: int | None = None) -> Console:
    """The console a command prints on. ``COLUMNS`` and ``LINES`` count when they hold a plain
    number up to :data:`MAX_TERMINAL_SIZE` (rich alone would fail on ``COLUMNS=²`` and pad lines
    to any width); without ``COLUMNS`` the terminal's width, or when output is not a terminal,
    ``width_when_not_a_terminal`` (rich's default: 80)."""
    environ = dict(os.environ)
    for name in ("COLUMNS", "LINES"):
        value = numeric_name(environ.pop(name, ""))
        if value and value <= MAX_TERMINAL_SIZE:
            environ[name] = str(value)
    console = Console(_environ=environ)
    if width_when_not_a_terminal and not console.is_terminal and "COLUMNS" not in environ:
        console = Console(_environ=environ, width=width_when_not_a_terminal)
    return console


def abbreviations(names: Iterable[str]) -> dict[str, str]:
    """A short, distinct name for each of ``names`` (for :attr:`Column.short`): the initials of a
    name's parts (``count_balance`` → ``cb``), more letters of the first part where two would
    coincide (``rounds``/``revoked`` → ``ro``/``re``); a name that cannot be told apart keeps its
    full form."""
    unique = list(dict.fromkeys(names))
    parts = {name: [p for p in re.split(r"[_\-\s.]+", name) if p] or [name] for name in unique}

    def candidate(name: str, letters: int) -> str:
        first, *rest = parts[name]
        return first[:letters] + "".join(p[0] for p in rest)

    letters = {name: 1 if len(parts[name]) > 1 else min(3, len(name)) for name in unique}
    while True:
        shown = {name: candidate(name, letters[name]) for name in unique}
        seen: dict[str, list[str]] = {}
        for name, short in shown.items():
            seen.setdefault(short, []).append(name)
        clashes = [names for names in seen.values() if len(names) > 1]
        if not clashes:
            return {
                name: short if len(short) < len(name) else name for name, short in shown.items()
            }
        grown = False
        for clash in clashes:
            for name in clash:
                if letters[name] < len(parts[name][0]):
                    letters[name] += 1
                    grown = True
        if not grown:
            for clash in clashes:
                for name in clash:
                    parts[name] = [name]
                    letters[name] = len(name)


class Kind(enum.Enum):
    NUMBER = "number"  # right-aligned, never broken
    NAME = "name"  # an identifier: never broken in a table
    TEXT = "text"  # free text: wraps at spaces, folds long words


@frozen
class Column:
    """``header`` may span lines (``"moved\\npartitions ↓"``); ``short`` replaces it, with a
    legend, when the full headers do not fit."""

    header: str
    kind: Kind = Kind.NAME
    short: str | None = None


#: Where a TEXT value may break: after a comma, before a run of whitespace.
_BREAK = re.compile(r"(?<=,)(?=\S)|(?=\s)")


def _tokens(line: str) -> list[int]:
    """The offsets a line may break at (0 and its end included)."""
    return sorted({0, len(line), *(m.start() for m in _BREAK.finditer(line))})


class Breakable:
    """A TEXT cell: wraps after commas and at spaces, so ``t0[0,3,6,...]`` and ``1,2,3`` break
    between numbers, never inside one; only a single token wider than the column is folded."""

    def __init__(self, text: Text):
        self.text = text

    def _lines(self) -> list[Text]:
        return list(self.text.split("\n", allow_blank=True))

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        plain = self.text.plain
        return Measurement(max(_longest_token(plain), 1), max(_longest_line(plain), 1)).clamp(
            max_width=options.max_width
        )

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = max(options.max_width, 1)
        out: list[Text] = []
        for line in self._lines():
            plain = line.plain
            offsets = _tokens(plain)
            current = Text()
            for a, b in itertools.pairwise(offsets):
                token = line[a:b]
                if current.plain and cell_len(current.plain + token.plain.rstrip()) > width:
                    out.append(current)
                    current = Text()
                    token = line[a + len(token.plain) - len(token.plain.lstrip()) : b]
                while cell_len(token.plain) > width:  # one token wider than the column: fold it
                    out.append(token[:width])
                    token = token[width:]
                current.append_text(token)
            out.append(current)
        for text in out:
            text.rstrip()
            yield text


class Legend:
    """What abbreviated headers stand for: entries packed into lines, an entry broken only when
    it is wider than a line."""

    def __init__(self, entries: Sequence[str]):
        self.entries = [plain(entry) for entry in entries]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = max(options.max_width, 1)
        line = Text(style="dim")
        for entry in self.entries:
            if line.plain and cell_len(line.plain) + 2 + cell_len(entry.plain) > width:
                yield Breakable(line)
                line = Text(style="dim")
            if line.plain:
                line.append("  ")
            line.append_text(entry)
        if line.plain:
            yield Breakable(line)


def _cell(value: Cell) -> Text:
    return value if isinstance(value, Text) else plain(value)


def _rows(value: Iterable[Sequence[Cell]]) -> tuple[tuple[Text, ...], ...]:
    return tuple(tuple(_cell(c) for c in row) for row in value)


def _columns(value: Iterable[Column]) -> tuple[Column, ...]:
    return tuple(value)


def _title(value: Cell | None) -> Text | None:
    return None if value is None else _cell(value)


def _longest_line(text: str) -> int:
    return max((cell_len(line) for line in text.split("\n")), default=0)


def _longest_word(text: str) -> int:
    return max((cell_len(word) for word in text.split()), default=0)


def _longest_token(text: str) -> int:
    """The widest part of ``text`` a :class:`Breakable` cannot break."""
    longest = 0
    for line in text.split("\n"):
        offsets = _tokens(line)
        for a, b in itertools.pairwise(offsets):
            longest = max(longest, cell_len(line[a:b].strip()))
    return longest


@frozen
class FittedTable:
    """A table laid out for the width it is rendered at (see the module docstring).

    :param keys: how many leading columns identify a row (the stacked layout's block title).
    :param sections: rows sharing their first cell form a section; the table shows that cell once.
    """

    columns: tuple[Column, ...] = field(converter=_columns)
    rows: tuple[tuple[Text, ...], ...] = field(converter=_rows)
    title: Text | None = field(default=None, converter=_title)
    keys: int = 1
    sections: bool = False

    def __attrs_post_init__(self) -> None:
        for row in self.rows:
            if len(row) != len(self.columns):
                raise ValueError(f"a row has {len(row)} cells for {len(self.columns)} columns")

    # -- measuring
    def _cells(self, index: int) -> list[str]:
        return [row[index].plain for row in self.rows]

    def _width(self, index: int, header: str) -> int:
        column = self.columns[index]
        cells = self._cells(index)
        if column.kind is Kind.TEXT:
            longest = max((_longest_line(c) for c in cells), default=0)
            token = max((_longest_token(c) for c in cells), default=0)
            return max(
                min(longest, 10), min(token, TEXT_MIN_WIDTH), min(_longest_word(header), 12), 1
            )
        return max(max((_longest_line(c) for c in cells), default=0), _longest_line(header), 1)

    def _needed(self, headers: Sequence[str]) -> tuple[int, list[int]]:
        widths = [self._width(i, h) for i, h in enumerate(headers)]
        return sum(widths) + 3 * len(widths) + 1, widths

    # -- layouts
    def _text_widths(
        self, headers: Sequence[str], widths: Sequence[int], total: int
    ) -> dict[int, int]:
        """The width of each TEXT column when the table is ``total`` wide: what it needs when all
        fit, else its least plus a share of what is left, in proportion to what it lacks (rich
        would also shrink numbers and names to fit)."""
        text = [i for i, c in enumerate(self.columns) if c.kind is Kind.TEXT]
        fixed = sum(w for i, w in enumerate(widths) if i not in text) + 3 * len(widths) + 1
        room = total - fixed - sum(widths[i] for i in text)
        wanted = {
            i: max(
                max((_longest_line(row[i].plain) for row in self.rows), default=0),
                _longest_line(headers[i]),
                widths[i],
            )
            - widths[i]
            for i in text
        }
        lacking = sum(wanted.values())
        if lacking <= room:
            return {i: widths[i] + wanted[i] for i in text}
        return {i: widths[i] + room * wanted[i] // lacking for i in text}

    def _table(self, headers: Sequence[str], widths: Sequence[int], total: int) -> Table:
        table = Table(title=self.title, title_justify="left")
        text_widths = self._text_widths(headers, widths, total)
        for index, (column, header, width) in enumerate(
            zip(self.columns, headers, widths, strict=True)
        ):
            if column.kind is Kind.TEXT:
                table.add_column(header, overflow="fold", width=text_widths[index])
            else:
                table.add_column(
                    header,
                    justify="right" if column.kind is Kind.NUMBER else "left",
                    no_wrap=True,
                    min_width=width,
                )
        previous: str | None = None
        for i, row in enumerate(self.rows):
            cells: list[Text | Breakable] = [
                Breakable(cell) if column.kind is Kind.TEXT else cell
                for column, cell in zip(self.columns, row, strict=True)
            ]
            if self.sections:
                first = row[0].plain
                if first == previous:
                    cells[0] = Text("")
                previous = first
                last = i + 1 == len(self.rows) or self.rows[i + 1][0].plain != first
                table.add_row(*cells, end_section=last)
            else:
                table.add_row(*cells)
        return table

    def _legend(self) -> Legend:
        return Legend(
            [
                f"{c.short} = {c.header.replace(chr(10), ' ')}"
                for c in self.columns
                if c.short is not None
            ]
        )

    def _stacked(self, width: int) -> Group:
        """Each row a block: its key in bold, then ``header  value`` lines (the value under its
        header when the two do not fit on one line)."""
        parts: list[RenderableType] = []
        if self.title is not None:
            parts.append(self.title)
        labels = [c.header.replace("\n", " ") for c in self.columns[self.keys :]]
        label_width = max((cell_len(label) for label in labels), default=1)
        widest_value = max(
            (_longest_token(cell.plain) for row in self.rows for cell in row[self.keys :]),
            default=1,
        )
        side_by_side = 2 + label_width + 1 + widest_value <= width
        previous: str | None = None
        for row in self.rows:
            key = Text(" / ").join(row[: self.keys])
            if self.sections and self.keys > 1:
                first = row[0].plain
                if first != previous:
                    parts.append(Text.assemble(row[0], style="bold"))
                previous = first
                key = Text(" / ").join(row[1 : self.keys])
            parts.append(Text.assemble(key, style="bold"))
            if side_by_side:
                grid = Table.grid(padding=(0, 1))
                grid.add_column(no_wrap=True, min_width=label_width + 2, style="dim")
                grid.add_column(overflow="fold")
                for label, cell in zip(labels, row[self.keys :], strict=True):
                    grid.add_row("  " + label, Breakable(cell))
                parts.append(grid)
            else:
                for label, cell in zip(labels, row[self.keys :], strict=True):
                    parts.append(Text("  " + label, style="dim"))
                    parts.append(Padding(Breakable(cell), (0, 0, 0, 4)))
        return Group(*parts)

    def _split(self, headers: Sequence[str], width: int) -> list[Table] | None:
        """Tables of the key columns and as many of the others as fit, until every column is
        shown; ``None`` when the keys and any one other column are too wide."""
        _, widths = self._needed(headers)
        keys = list(range(self.keys))
        base = sum(widths[i] + 3 for i in keys) + 1
        chunks: list[list[int]] = []
        used = base
        for i in range(self.keys, len(self.columns)):
            cost = widths[i] + 3
            if base + cost > width:
                return None
            if not chunks or used + cost > width:
                chunks.append([])
                used = base
            chunks[-1].append(i)
            used += cost
        tables = []
        for n, chunk in enumerate(chunks):
            part = FittedTable(
                [self.columns[i] for i in keys + chunk],
                [[row[i] for i in keys + chunk] for row in self.rows],
                title=self.title if n == 0 else None,
                keys=self.keys,
                sections=self.sections,
            )
            tables.append(
                part._table(
                    [headers[i] for i in keys + chunk], [widths[i] for i in keys + chunk], width
                )
            )
        return tables

    def layout(self, width: int) -> Table | Group:
        """The layout used at ``width`` columns."""
        full = [c.header for c in self.columns]
        needed, widths = self._needed(full)
        if needed <= width:
            return self._table(full, widths, width)
        abbreviated = any(c.short is not None for c in self.columns)
        short = [c.short or c.header for c in self.columns]
        if abbreviated:
            needed, widths = self._needed(short)
            if needed <= width:
                return Group(self._table(short, widths, width), self._legend())
        split = self._split(short, width) if len(self.columns) > self.keys + 1 else None
        if split is not None:
            return Group(*split, self._legend()) if abbreviated else Group(*split)
        return self._stacked(width)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.layout(options.max_width)
