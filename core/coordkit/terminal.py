"""Text from users and stores, made safe to print on a terminal.

Names, paths and values can hold escape sequences (``\\x1b]0;title``, ``\\x1b[31m``), other control
characters, or bidirectional overrides that make a terminal show something else than what is
there. :func:`visible` shows each such character as an escape (``\\x1b``, ``\\u202e``), so what is
printed is what the store holds, inert.
"""

from __future__ import annotations

import unicodedata

#: Format characters that reorder text on screen (Trojan Source).
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f")


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """``text`` with control, bidi-override and unpaired-surrogate characters escaped."""
    if text.isprintable() and not any(c in _BIDI for c in text):
        return text
    out = []
    for char in text:
        category = unicodedata.category(char)
        if category in ("Cc", "Cs") or char in _BIDI or (category == "Cf" and char != "\u200d"):
            out.append(_escape(char))
        else:
            out.append(char)
    return "".join(out)
