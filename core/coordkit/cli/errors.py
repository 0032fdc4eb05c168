"""How a ``coordkit`` command refuses its input: one line on stderr, ``error: ...`` in red, exit
status 2, and nothing written.

Every :class:`~coordkit.errors.CoordkitError` a command raises (a malformed store node, bad
assignor input, an unknown plugin name, ...) becomes a :class:`CommandError` in one place, the
``coordkit`` group (:mod:`coordkit.cli`); click's own usage errors keep their form. Messages pass
through :func:`~coordkit.support.terminal.visible` first: they quote names, paths and values from the user
or the store, which may hold escape sequences.
"""

from __future__ import annotations

from typing import IO, Any

import click

from coordkit.support.terminal import visible

#: The exit status of a command that refused its input (click uses it for usage errors too).
INPUT_REFUSED = 2


def visible_message(text: str) -> str:
    """``text`` made :func:`visible` line by line (a message may span lines on purpose)."""
    return "\n".join(visible(line) for line in text.split("\n"))


class CommandError(click.ClickException):
    """Input a command refuses; the message names what was wrong and where (path, field, option).

    Shown as one red ``error: ...`` line on stderr; the exit status is 2.
    """

    exit_code = INPUT_REFUSED

    def __init__(self, message: str):
        super().__init__(visible_message(message))

    def show(self, file: IO[Any] | None = None) -> None:
        click.secho(f"error: {self.format_message()}", fg="red", err=file is None, file=file)
