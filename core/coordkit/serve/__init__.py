"""``coordkit serve``: engine brokers that real Kafka clients talk to over Kafka's protocol.

* :mod:`~coordkit.serve.server` — the process: its brokers, logs and followers, the event
  loop; :mod:`~coordkit.serve.binding` — the sockets and the host clients are told;
  :mod:`~coordkit.serve.serving_cluster` — engine brokers registering their real addresses;
  :mod:`~coordkit.serve.broker_config` — ``--config KEY=VALUE``;
* :mod:`~coordkit.serve.listener`, :mod:`~coordkit.serve.connection` — one broker's listener
  and connections (asyncio; where authentication will sit);
* :mod:`~coordkit.serve.dispatch` — the apis and versions served, ApiVersions, dispatch to
  :mod:`coordkit.serve.apis`, one module per api family (Kafka's ``KafkaApis``);
* :mod:`~coordkit.serve.context` — what a handler is given of its broker;
* :mod:`coordkit.serve.dataplane` — logs, log directories, producer state, replicas and their
  fetchers: what holds and moves records (Kafka's log layer and ``ReplicaManager``).
"""

from coordkit.serve.binding import Address, ServeError
from coordkit.serve.context import BrokerContext, ServeSettings
from coordkit.serve.dispatch import SUPPORTED
from coordkit.serve.server import KafkaServer

__all__ = ["SUPPORTED", "Address", "BrokerContext", "KafkaServer", "ServeError", "ServeSettings"]
