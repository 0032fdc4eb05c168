"""``coordkit configs``: topic and broker configs as ``kafka-configs.sh`` changes them
(:mod:`.command`; the options' parsing and checks: :mod:`.changes`)."""

from __future__ import annotations

from coordkit.cli.configs.command import configs_command

__all__ = ["configs_command"]
