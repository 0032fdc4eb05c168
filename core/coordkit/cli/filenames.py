"""File and directory arguments: names the system cannot encode are refused as usage errors."""

from __future__ import annotations

import os
from typing import Any

import click

from coordkit.support.terminal import visible


class LocalPath(click.Path):
    """:class:`click.Path` that first refuses a name this system cannot encode as a file name
    (a lone surrogate, say) with a usage error, instead of the encoding error ``os.stat`` would
    raise."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str):
            try:
                os.fsencode(value)
            except UnicodeEncodeError:
                self.fail(f"{visible(value)}: not a file name this system can use", param, ctx)
        return super().convert(value, param, ctx)
