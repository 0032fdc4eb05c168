"""What one ``coordkit serve`` process sends to and keeps from the cluster's control plane:

* :mod:`.channel` — a controller elected here telling brokers of other processes (Kafka's
  ``ControllerChannelManager``);
* :mod:`.client` — a broker here asking a controller elsewhere for a controlled shutdown;
* :mod:`.connection` — the blocking broker-to-broker connection both use;
* :mod:`.connector` — how every connection to another broker is opened (the inter-broker
  listener's endpoint, TLS and SASL login);
* :mod:`.metadata_cache` — what the controllers' requests told this process's brokers, and the
  fencing of those requests (Kafka's ``ZkMetadataCache``).

The handlers of the requests received are :mod:`coordkit.serve.apis.inter_broker`'s.
"""
