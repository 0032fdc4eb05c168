"""Engine settings, named after the Kafka broker settings they stand for."""

from __future__ import annotations

import attrs
from attrs import validators

#: Topic config key that turns unclean leader election on or off for one topic (Kafka's name).
UNCLEAN_LEADER_ELECTION_ENABLE = "unclean.leader.election.enable"


@attrs.frozen
class EngineConfig:
    """How brokers and controllers behave.

    :param controller_election: controller election strategy (``kafka``, ``latch`` or a plugin's).
    :param offline_election: partition leader election when a leader is lost (``offline``, or
        ``offline-unclean`` for ``unclean.leader.election.enable=true`` cluster-wide); a topic's
        own ``unclean.leader.election.enable`` config overrides it.
    :param preferred_election: strategy of preferred-replica (rebalance) elections.
    :param controlled_shutdown_election: strategy moving leadership off a broker shutting down.
    :param auto_leader_rebalance: ``auto.leader.rebalance.enable``.
    :param leader_imbalance_check_interval: ``leader.imbalance.check.interval.seconds``.
    :param leader_imbalance_per_broker_percentage: ``leader.imbalance.per.broker.percentage``.
    :param delete_topic_enable: ``delete.topic.enable``.
    :param write_batch_ops: store ops per controller multi (each multi adds the epoch check).
    :param write_concurrency: controller multis in flight at once on a networked store.
    :param read_batch: paths per pipelined read.
    :param controlled_shutdown_timeout: how long a broker waits for the controller to move its
        leaders before it stops anyway.
    :param group_coordinator: group-coordinator strategy (group → offsets-topic partition).
    :param group_leader: group-leader strategy (which member computes the assignment).
    :param offset_storage: offset storage plugin the coordinators commit through.
    :param offsets_topic_num_partitions: ``offsets.topic.num.partitions``.
    :param offsets_topic_replication_factor: ``offsets.topic.replication.factor`` (capped by
        the live brokers when the topic is created).
    :param group_initial_rebalance_delay: ``group.initial.rebalance.delay.ms``, in seconds.
    :param group_min_session_timeout: ``group.min.session.timeout.ms``, in seconds (Kafka: 6).
    :param group_max_session_timeout: ``group.max.session.timeout.ms``, in seconds.
    :param consumer_group_assignors: ``group.consumer.assignors``: the server-side assignors
        consumer groups (KIP-848) may name; the first is the default.
    :param consumer_group_session_timeout: ``group.consumer.session.timeout.ms``, in seconds.
    :param consumer_group_heartbeat_interval: ``group.consumer.heartbeat.interval.ms``, seconds.
    :param consumer_group_max_size: ``group.consumer.max.size``.
    :param share_group_assignors: ``group.share.assignors``: the share-partition assignors
        (KIP-932); share groups use the first.
    :param share_group_session_timeout: ``group.share.session.timeout.ms``, in seconds.
    :param share_group_heartbeat_interval: ``group.share.heartbeat.interval.ms``, in seconds.
    :param share_group_max_size: ``group.share.max.size``.
    :param consumer_group_assignment_interval: ``group.consumer.assignment.interval.ms``, in
        seconds: a group's target is computed at most this often (Kafka 4.4: 1 s).
    :param placement: replica placement strategy for new topics and partition increases
        (``kafka-rack-aware``: Kafka's own; ``kafka``, ``balanced``, ``rendezvous`` or a plugin's).
    :param reassignment_max_moving: partitions a reassignment moves at once (the rest wait), so
        a large plan does not stall the cluster.
    :param replica_lag_time_max: ``replica.lag.time.max.ms``, in seconds: a follower that has not
        caught up with its leader for this long leaves the ISR (the leader shrinks it).
    :param replica_fetch_wait_max: ``replica.fetch.wait.max.ms``, in seconds: how long a
        follower's fetch waits for new records, so how often an idle follower fetches.
    :param replication: run each broker's replica fetcher and ISR maintenance on background
        threads; off, replication moves only when :meth:`Cluster.replicate` is called.
    """

    controller_election: str = "kafka"
    offline_election: str = "offline"
    preferred_election: str = "preferred"
    controlled_shutdown_election: str = "controlled-shutdown"
    auto_leader_rebalance: bool = True
    leader_imbalance_check_interval: float = attrs.field(default=300.0, validator=validators.gt(0))
    leader_imbalance_per_broker_percentage: float = attrs.field(
        default=10.0, validator=validators.ge(0)
    )
    delete_topic_enable: bool = True
    write_batch_ops: int = attrs.field(default=2000, validator=validators.ge(4))
    write_concurrency: int = attrs.field(default=4, validator=validators.ge(1))
    read_batch: int = attrs.field(default=20000, validator=validators.ge(1))
    controlled_shutdown_timeout: float = attrs.field(default=30.0, validator=validators.gt(0))
    group_coordinator: str = "kafka"
    group_leader: str = "kafka"
    offset_storage: str = "offsets-topic"
    offsets_topic_num_partitions: int = attrs.field(default=50, validator=validators.ge(1))
    offsets_topic_replication_factor: int = attrs.field(default=3, validator=validators.ge(1))
    group_initial_rebalance_delay: float = attrs.field(default=3.0, validator=validators.ge(0))
    # Kafka's minimum is 6 s; coordkit accepts the short sessions tests and the lab use.
    group_min_session_timeout: float = attrs.field(default=0.1, validator=validators.gt(0))
    group_max_session_timeout: float = attrs.field(default=1800.0, validator=validators.gt(0))
    consumer_group_assignors: tuple[str, ...] = attrs.field(
        default=("uniform", "range"), converter=tuple, validator=validators.min_len(1)
    )
    consumer_group_session_timeout: float = attrs.field(default=45.0, validator=validators.gt(0))
    consumer_group_heartbeat_interval: float = attrs.field(default=5.0, validator=validators.gt(0))
    consumer_group_max_size: int = attrs.field(default=2**31 - 1, validator=validators.ge(1))
    consumer_group_assignment_interval: float = attrs.field(default=1.0, validator=validators.ge(0))
    share_group_assignors: tuple[str, ...] = attrs.field(
        default=("simple",), converter=tuple, validator=validators.min_len(1)
    )
    share_group_session_timeout: float = attrs.field(default=45.0, validator=validators.gt(0))
    share_group_heartbeat_interval: float = attrs.field(default=5.0, validator=validators.gt(0))
    share_group_max_size: int = attrs.field(default=200, validator=validators.ge(1))
    placement: str = "kafka-rack-aware"
    reassignment_max_moving: int = attrs.field(default=500, validator=validators.ge(1))
    replica_lag_time_max: float = attrs.field(default=30.0, validator=validators.gt(0))
    replica_fetch_wait_max: float = attrs.field(default=0.5, validator=validators.gt(0))
    replication: bool = True
