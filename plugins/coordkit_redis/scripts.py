"""The Lua scripts: one per compound write, each prefixed with the shared engine (lua/engine.lua).

Scripts are called by SHA (EVALSHA); a server that does not know one yet (first use, or after a
restart) answers NOSCRIPT without running anything, so loading it and calling again is safe.
"""

from __future__ import annotations

import hashlib
from importlib import resources

import attrs


@attrs.frozen
class LuaScript:
    name: str
    source: bytes = attrs.field(repr=False)
    sha: str


def _read(name: str) -> str:
    return resources.files("coordkit_redis").joinpath("lua", f"{name}.lua").read_text("utf-8")


def _compose(name: str, engine: str) -> LuaScript:
    source = f"{engine}\n-- == {name}.lua ==\n{_read(name)}".encode()
    return LuaScript(name, source, hashlib.sha1(source, usedforsecurity=False).hexdigest())


@attrs.frozen
class Scripts:
    ops: LuaScript
    session_open: LuaScript
    heartbeat: LuaScript
    session_close: LuaScript
    reap: LuaScript
    stat: LuaScript
    children: LuaScript
    read: LuaScript
    tree_register: LuaScript
    tree_newest: LuaScript

    def all(self) -> tuple[LuaScript, ...]:
        return attrs.astuple(self, recurse=False)


def load_scripts() -> Scripts:
    engine = _read("engine")
    names = [field.name for field in attrs.fields(Scripts)]
    return Scripts(**{name: _compose(name, engine) for name in names})


SCRIPTS = load_scripts()
