"""The transaction coordinator's settings: Kafka's broker configs of it
(``TransactionStateManagerConfig``, ``TransactionLogConfig``) that ``coordkit serve`` honours."""

from __future__ import annotations

import attrs


@attrs.frozen
class TransactionSettings:
    """Kafka's transaction coordinator configs (``TransactionStateManagerConfig``,
    ``TransactionLogConfig``) that ``coordkit serve`` honours."""

    max_timeout_ms: int = 900_000
    abort_timed_out_cleanup_interval_ms: int = 10_000
    num_partitions: int = 50
    replication_factor: int = 3
    min_isr: int = 2
    segment_bytes: int = 104_857_600

    def topic_configs(self) -> dict[str, str]:
        """The configs Kafka creates ``__transaction_state`` with (``TransactionLog``)."""
        return {
            "cleanup.policy": "compact",
            "compression.type": "uncompressed",
            "min.insync.replicas": str(self.min_isr),
            "segment.bytes": str(self.segment_bytes),
            "unclean.leader.election.enable": "false",
        }
