"""``coordkit group``, one module per part:

* :mod:`.command` — the click commands (``run``, ``describe``) and their options;
* :mod:`.runs` — what a run is (settings, numbered consumers, observations);
* :mod:`.classic` and :mod:`.legacy` — running the classic group protocol or the legacy
  ZooKeeper consumer;
* :mod:`.steps` — the ``--step`` language;
* :mod:`.view` — snapshots and their rendering;
* :mod:`.stored` — what the store holds for a group (``describe``).
"""

from coordkit.cli.group.command import group_group

__all__ = ["group_group"]
