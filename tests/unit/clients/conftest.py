"""Cluster metadata for the client assignor tests: a real MetadataResponse (encoded by coordkit's
codec, decoded by each client's own decoder) loaded into the client's ClusterMetadata."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

from coordkit.protocol import KafkaCodec, messages


def metadata_response_bytes(topics: Mapping[str, int]) -> bytes:
    """A MetadataResponse v1 body: one broker, ``topics`` with their partition counts."""
    response = messages.MetadataResponse
    body = response(
        brokers=[response.MetadataResponseBroker(node_id=0, host="127.0.0.1", port=9092)],
        controller_id=0,
        topics=[
            response.MetadataResponseTopic(
                error_code=0,
                name=topic,
                is_internal=False,
                partitions=[
                    response.MetadataResponsePartition(
                        error_code=0,
                        partition_index=p,
                        leader_id=0,
                        replica_nodes=[0],
                        isr_nodes=[0],
                    )
                    for p in range(count)
                ],
            )
            for topic, count in topics.items()
        ],
    )
    return KafkaCodec().encode_body(body, 1)


@pytest.fixture
def kafka_python_metadata() -> Callable[[Mapping[str, int]], Any]:
    """kafka-python's MetadataResponse object for ``topics``."""
    from kafka.protocol.metadata import MetadataResponse

    def build(topics: Mapping[str, int]) -> Any:
        return MetadataResponse.decode(metadata_response_bytes(topics), version=1, header=False)

    return build


@pytest.fixture
def kafka_python_cluster(
    kafka_python_metadata: Callable[[Mapping[str, int]], Any],
) -> Callable[[Mapping[str, int]], Any]:
    from kafka.cluster import ClusterMetadata

    def build(topics: Mapping[str, int]) -> Any:
        cluster = ClusterMetadata()
        cluster.update_metadata(kafka_python_metadata(topics))
        return cluster

    return build


@pytest.fixture
def aiokafka_cluster() -> Callable[[Mapping[str, int]], Any]:
    from aiokafka.cluster import ClusterMetadata
    from aiokafka.protocol.metadata import MetadataResponse_v1

    def build(topics: Mapping[str, int]) -> Any:
        cluster = ClusterMetadata()
        cluster.update_metadata(MetadataResponse_v1.decode(metadata_response_bytes(topics)))
        return cluster

    return build
