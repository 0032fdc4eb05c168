"""Text from users and stores, made safe to print on a terminal.

Names, paths and values can hold escape sequences (``\\x1b]0;title``, ``\\x1b[31m``), other control
characters, or bidirectional overrides that make a terminal show something else than what is
there. :func:`visible` shows each such character as an escape (``\\x1b``, ``\\u202e``), so what is
printed is what the store holds, inert.

Rich reads ``[bold]`` in a string as markup, so text that is not coordkit's own must reach rich
either as a :class:`~rich.text.Text` (:func:`plain`) or escaped inside a markup string
(:func:`markup`); JSON printed for a terminal goes through :func:`visible_json`.
"""

from __future__ import annotations

import re
import unicodedata

from rich.markup import escape
from rich.text import Text

#: Format characters that reorder text on screen (Trojan Source).
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f")
#: Categories shown escaped: controls, surrogates, line and paragraph separators.
_ESCAPED_CATEGORIES = frozenset(("Cc", "Cs", "Zl", "Zp"))


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _needs_escape(char: str) -> bool:
    category = unicodedata.category(char)
    return (
        category in _ESCAPED_CATEGORIES or char in _BIDI or (category == "Cf" and char != "\u200d")
    )


def visible(text: str) -> str:
    """``text`` with control, bidi-override and unpaired-surrogate characters escaped."""
    if text.isprintable() and not any(c in _BIDI for c in text):
        return text
    return "".join(_escape(char) if _needs_escape(char) else char for char in text)


def markup(text: object) -> str:
    """``str(text)`` made :func:`visible` and escaped, to embed in a rich markup string."""
    return escape(visible(str(text)))


def plain(text: object, style: str = "") -> Text:
    """``str(text)`` made :func:`visible` as a rich ``Text``: never read as markup."""
    return Text(visible(str(text)), style=style)


# JSON output escapes C0 controls itself; with ensure_ascii=False it leaves the rest raw.
_NON_ASCII = re.compile("[^\x00-\x7e]")


def _json_escape(match: re.Match[str]) -> str:
    char = match.group()
    return f"\\u{ord(char):04x}" if _needs_escape(char) else char


def visible_json(document: str) -> str:
    """A JSON document (as ``json.dumps(..., ensure_ascii=False)`` writes it) with the characters
    :func:`visible` escapes written as ``\\uXXXX``: the same JSON value, inert on a terminal.

    Such characters can only occur inside JSON strings, where ``\\uXXXX`` means the same character.
    """
    if document.isascii() and "\x7f" not in document:
        return document
    return _NON_ASCII.sub(_json_escape, document)
