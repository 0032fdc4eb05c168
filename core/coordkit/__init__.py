"""coordkit: the coordination layer of partitioned log systems, as pluggable parts.

The core defines the hook specifications (:mod:`coordkit.hookspecs`), the plugin manager
(:mod:`coordkit.plugins`), Kafka's data model and znode layout (:mod:`coordkit.model`,
:mod:`coordkit.layout`), the metadata store contract (:mod:`coordkit.store`) and the assignor
contract (:mod:`coordkit.assignment`). Stores, strategies and the lab are plugins.
"""

from coordkit.__about__ import __version__
from coordkit.hookspecs import NAME, hookimpl
from coordkit.plugins import get_plugin_manager, open_store

__all__ = ["NAME", "__version__", "get_plugin_manager", "hookimpl", "open_store"]
