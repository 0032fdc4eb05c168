"""``coordkit cluster``: brokers in this process on a store (``demo``), and a cluster's
invariants checked against its store (``check``).

* :mod:`.spec` — the ``--topic`` and ``--step`` language;
* :mod:`.demo` — running the brokers and the steps;
* :mod:`.view` — rendering the cluster and the invariant check;
* :mod:`.check` — the read-only check.
"""

import click

from coordkit.cli.cluster.check import check_command
from coordkit.cli.cluster.demo import demo_command


@click.group("cluster")
def cluster_group() -> None:
    """Run brokers in this process on a store and watch controller, epochs and leaders; check
    a cluster's invariants."""


cluster_group.add_command(check_command)
cluster_group.add_command(demo_command)

__all__ = ["cluster_group"]
