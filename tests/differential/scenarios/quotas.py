"""Scenarios of the client-quota apis (issue #35): AlterClientQuotas and DescribeClientQuotas.

Each scenario's users and client ids start with its prefix, and only entities of the scenario
(or default ones, which only ``quotas.defaults`` sets, and removes) are kept from a describe, so
scenarios sharing a cluster never see each other's. Kafka 4.4 applies an alter through its
controller and its brokers learn of it a little later: a describe after an alter is repeated
until it shows what the alter did (on both sides alike). Kafka lists entries, and answers
alters, from hash maps: those lists are compared sorted; an entry's entity components and
values are compared in the order each side gives them. Versions: the highest both serve.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from typing import Any

from coordkit.protocol import KafkaCodec, messages
from coordkit.testing.waiting import wait_for
from differential import requests as rq
from differential.harness import WAIT_SECONDS, Side, scenario

DESCRIBE = 1
ALTER = 1
VERSIONS = {"DescribeClientQuotas": DESCRIBE, "AlterClientQuotas": ALTER}
EXACT, DEFAULT, ANY = 0, 1, 2
USER, CLIENT, IP = "user", "client-id", "ip"

Entity = Sequence[tuple[str, str | None]]
Ops = Sequence[tuple[str, float | None]]


def alter(side: Side, entries: Sequence[tuple[Entity, Ops]], validate_only: bool = False) -> Any:
    Request: Any = messages.AlterClientQuotasRequest
    Entry = Request.EntryData
    request = Request(entries=[Entry(
        entity=[Entry.EntityData(entity_type=t, entity_name=n) for t, n in entity],
        ops=[Entry.OpData(key=k, value=0.0 if v is None else v, remove=v is None)
             for k, v in ops]) for entity, ops in entries], validate_only=validate_only)  # fmt: skip
    answer = side.call(0, request, ALTER)
    answer.entries.sort(
        key=lambda e: sorted((d.entity_type, d.entity_name or "") for d in e.entity)
    )
    return answer


def _ours(side: Side, entry: Any) -> bool:
    names = [d.entity_name for d in entry.entity]
    return all(n is None or n.startswith(side.prefix) or n.startswith("192.0.2.") for n in names)


def _describe_request(components: Sequence[tuple[str, int, str | None]],
                      strict: bool = False) -> Any:  # fmt: skip
    Request: Any = messages.DescribeClientQuotasRequest
    return Request(components=[Request.ComponentData(entity_type=t, match_type=m, match=s)
                               for t, m, s in components], strict=strict)  # fmt: skip


def describe(side: Side, components: Sequence[tuple[str, int, str | None]],
             strict: bool = False) -> Any:  # fmt: skip
    """The scenario's entities the filter matches, sorted by entity."""
    answer = side.call(0, _describe_request(components, strict), DESCRIBE)
    if answer.entries is not None:
        answer.entries = sorted(
            (e for e in answer.entries if _ours(side, e)),
            key=lambda e: sorted((d.entity_type, d.entity_name or "") for d in e.entity),
        )
    return answer


def settled(side: Side, components: Sequence[tuple[str, int, str | None]], count: int,
            strict: bool = False) -> Any:  # fmt: skip
    """Describe until the filter matches ``count`` of the scenario's entities."""
    found: list[Any] = []

    def matched() -> bool:
        found[:] = [describe(side, components, strict)]
        return len(found[0].entries or ()) == count

    wait_for(matched, WAIT_SECONDS, f"{side.name}: {count} quota entities described")
    return found[0]


@scenario("quotas.alter_then_describe", versions=VERSIONS)
def alter_then_describe(side: Side) -> list[Any]:
    """Quotas of a user, the user's client id, another client id and an address; described by
    an exact name (strict or not), any name, a client id with any user; the types of the
    values (LONG, DOUBLE, INT) as Kafka answers them; then removed: nothing described."""
    user, client, other = side.group("alice"), side.group("c1"), side.group("c2")
    address = "192.0.2.17"
    answers = [alter(side, [
        (((USER, user),), (("producer_byte_rate", 1024.0), ("request_percentage", 12.5))),
        (((USER, user), (CLIENT, client)), (("consumer_byte_rate", 2048.0),)),
        (((CLIENT, other),), (("controller_mutation_rate", 1e10),)),
        (((IP, address),), (("connection_creation_rate", 30.0),)),
    ])]  # fmt: skip
    answers.append(settled(side, [(USER, EXACT, user)], 2))
    answers.append(describe(side, [(USER, EXACT, user)], strict=True))
    answers.append(describe(side, [(USER, ANY, None)], strict=True))
    answers.append(describe(side, [(CLIENT, EXACT, client), (USER, ANY, None)]))
    answers.append(describe(side, [(CLIENT, ANY, None)]))
    answers.append(settled(side, [(IP, EXACT, address)], 1))
    answers.append(describe(side, []))
    answers.append(alter(side, [
        (((USER, user),), (("producer_byte_rate", None), ("request_percentage", None))),
        (((USER, user), (CLIENT, client)), (("consumer_byte_rate", None),)),
        (((CLIENT, other),), (("controller_mutation_rate", None),)),
        (((IP, address),), (("connection_creation_rate", None),)),
    ]))  # fmt: skip
    answers.append(settled(side, [], 0))
    return answers


@scenario("quotas.change_one_of_several", versions=VERSIONS)
def change_one_of_several(side: Side) -> list[Any]:
    """A quota changed and another removed leave the entity's third quota as it was."""
    user = side.group("bob")
    entity = ((USER, user),)
    answers = [alter(side, [(entity, (("producer_byte_rate", 100.0), ("consumer_byte_rate",
                                      200.0), ("request_percentage", 50.0)))])]  # fmt: skip
    settled(side, [(USER, EXACT, user)], 1)
    answers.append(alter(side, [(entity, (("producer_byte_rate", 300.0),
                                          ("consumer_byte_rate", None)))]))  # fmt: skip

    def changed() -> bool:
        entries = describe(side, [(USER, EXACT, user)]).entries
        return bool(entries) and len(entries[0].values) == 2

    wait_for(changed, WAIT_SECONDS, f"{side.name}: {user}'s quotas changed")
    answers.append(describe(side, [(USER, EXACT, user)]))
    answers.append(alter(side, [(entity, (("producer_byte_rate", None),
                                          ("request_percentage", None)))]))  # fmt: skip
    settled(side, [(USER, EXACT, user)], 0)
    return answers


@scenario("quotas.defaults", versions=VERSIONS)
def defaults(side: Side) -> list[Any]:
    """The default user, the default client id, and a default client id of the default user:
    set, described by MATCH_TYPE_DEFAULT and by any name, then removed."""
    answers = [alter(side, [
        (((USER, None),), (("producer_byte_rate", 100.0),)),
        (((CLIENT, None),), (("consumer_byte_rate", 300.0),)),
        (((USER, None), (CLIENT, None)), (("producer_byte_rate", 200.0),)),
    ])]  # fmt: skip
    try:
        answers.append(settled(side, [(USER, DEFAULT, None)], 2))
        answers.append(describe(side, [(USER, DEFAULT, None)], strict=True))
        answers.append(describe(side, [(CLIENT, DEFAULT, None)]))
    finally:
        answers.append(alter(side, [
            (((USER, None),), (("producer_byte_rate", None),)),
            (((CLIENT, None),), (("consumer_byte_rate", None),)),
            (((USER, None), (CLIENT, None)), (("producer_byte_rate", None),)),
        ]))  # fmt: skip
        settled(side, [(USER, DEFAULT, None)], 0)
        settled(side, [(CLIENT, DEFAULT, None)], 0)
    return answers


@scenario("quotas.validate_only", versions=VERSIONS)
def validate_only(side: Side) -> list[Any]:
    """``validate_only``: accepted, nothing stored (a quota set afterwards shows alone)."""
    user = side.group("v")
    answers = [alter(side, [(((USER, user),), (("producer_byte_rate", 10.0),))], True)]
    answers.append(alter(side, [(((USER, user),), (("consumer_byte_rate", 20.0),))]))
    answers.append(settled(side, [(USER, EXACT, user)], 1))
    alter(side, [(((USER, user),), (("consumer_byte_rate", None),))])
    settled(side, [(USER, EXACT, user)], 0)
    return answers


@scenario("quotas.alter_refusals", versions=VERSIONS, compare_messages=True)
def alter_refusals(side: Side) -> list[Any]:
    """Refused entities, Kafka's messages: an unknown quota, one an IP may not have, a
    fraction of a LONG, zero, a negative, too large a LONG and INT, not a number, an IP with a
    user, an address that does not resolve, no entity, an unknown entity type, an empty name,
    a quota twice; one good entity beside a bad one is written, the bad one is not."""
    user, other = side.group("r"), side.group("r2")
    entity = ((USER, user),)
    address = ((IP, "192.0.2.18"),)
    cases: list[tuple[Entity, Ops]] = [
        (entity, (("bogus", 1.0),)),
        (entity, (("connection_creation_rate", 5.0),)),
        (address, (("producer_byte_rate", 5.0),)),
        (entity, (("producer_byte_rate", 1.5),)),
        (entity, (("producer_byte_rate", 0.0),)),
        (entity, (("consumer_byte_rate", -3.0),)),
        (entity, (("producer_byte_rate", 1e30),)),
        (address, (("connection_creation_rate", 3e9),)),
        (address, (("connection_creation_rate", 5.5),)),
        (entity, (("request_percentage", float("nan")),)),
        (((IP, "192.0.2.19"), (USER, user)), (("connection_creation_rate", 5.0),)),
        (((IP, "no host here!"),), (("connection_creation_rate", 5.0),)),
        ((), (("producer_byte_rate", 5.0),)),
        (((side.group("bogus-type"), "x"),), (("producer_byte_rate", 5.0),)),
        (((USER, ""),), (("producer_byte_rate", 5.0),)),
        (entity, (("producer_byte_rate", 5.0), ("producer_byte_rate", 6.0))),
    ]
    answers = [alter(side, [case]) for case in cases]
    answers.append(alter(side, [(((USER, other),), (("producer_byte_rate", 5.0),)),
                                (entity, (("bogus", 5.0),))]))  # fmt: skip
    answers.append(settled(side, [(USER, ANY, None)], 1, strict=True))
    alter(side, [(((USER, other),), (("producer_byte_rate", None),))])
    settled(side, [(USER, EXACT, other)], 0)
    return answers


@scenario("quotas.describe_refusals", versions=VERSIONS, compare_messages=True)
def describe_refusals(side: Side) -> list[Any]:
    """Refused filters, Kafka's codes and messages: an IP with a user, an unknown entity type
    (UNSUPPORTED_VERSION), an empty one, a type twice, an exact match without a name, a default
    or any match with one, an unknown match type; no filter at all, strict: nothing."""
    cases: list[tuple[list[tuple[str, int, str | None]], bool]] = [
        ([(IP, ANY, None), (USER, ANY, None)], False),
        ([("bogus", ANY, None)], False),
        ([("", ANY, None)], False),
        ([(USER, ANY, None), (USER, EXACT, "x")], False),
        ([(USER, EXACT, None)], False),
        ([(USER, DEFAULT, "x")], False),
        ([(USER, ANY, "x")], False),
        ([(USER, 7, None)], False),
        ([], True),
    ]
    return [describe(side, components, strict) for components, strict in cases]


def _produce_as(side: Side, index: int, client_id: str, topic: str) -> Any:
    """One Produce of 2 KiB to broker ``index`` from a connection of its own with
    ``client_id`` (the scenarios' connections share one client id no quota may name)."""
    codec = KafkaCodec()
    host, port = side.addresses[index]
    side.check_version("Produce", rq.PRODUCE)
    with socket.create_connection((host, port), timeout=WAIT_SECONDS) as sock:
        request = rq.produce(topic, 0, rq.batch(4, value_size=512), acks=1)
        sock.sendall(codec.encode_request(request, version=rq.PRODUCE, correlation_id=1,
                                          client_id=client_id))  # fmt: skip
        size = int.from_bytes(_exactly(sock, 4), "big")
        return codec.decode_response("Produce", rq.PRODUCE, _exactly(sock, size))[1]


def _exactly(sock: socket.socket, count: int) -> bytes:
    data = bytearray()
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        data += chunk
    return bytes(data)


@scenario("quotas.not_enforced", versions={**VERSIONS, "Produce": rq.PRODUCE})
def not_enforced(side: Side) -> list[Any]:
    """A client id limited to 1 byte/s of produce sends 2 KiB: Kafka answers it with a throttle
    time (and holds its connection that long); coordkit serve stores and describes the quota but
    throttles no one (``throttled`` records whether the answer's ``throttle_time_ms`` is above
    0, a field every other comparison leaves out)."""
    topic, client = side.topic(), side.group("throttled")
    side.create_topic(topic, replication=1)
    leader = side.leader(topic)
    entity = ((CLIENT, client),)
    answers = [alter(side, [(entity, (("producer_byte_rate", 1.0),))])]
    try:
        wait_for(lambda: len(side.call(leader, _describe_request([(CLIENT, EXACT, client)]),
                                       DESCRIBE).entries) == 1,
                 WAIT_SECONDS, f"{side.name}: the quota on the leader")  # fmt: skip
        produced = _produce_as(side, leader, client, topic)
        partition = produced.responses[0].partition_responses[0]
        answers.append({"error_code": partition.error_code,
                        "throttled": produced.throttle_time_ms > 0})  # fmt: skip
    finally:
        answers.append(alter(side, [(entity, (("producer_byte_rate", None),))]))
    return answers
