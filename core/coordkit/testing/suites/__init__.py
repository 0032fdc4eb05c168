"""Test modules the plugin collects for ``--coordkit-store``, ``--coordkit-assignor``,
``--coordkit-election`` and ``--coordkit-partitioner`` (each runs one whole suite on the named
components)."""
