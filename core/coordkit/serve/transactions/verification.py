"""A partition leader asking the transaction coordinator whether a transactional Produce's
partitions are in the producer's transaction before it appends (KIP-890 part 1, Kafka's
``AddPartitionsToTxnManager`` and ``ReplicaManager.handleProduceAppend``; the broker config
``transaction.partition.verification.enable``, true by default).

A partition needs asking only when the producer has no open transaction in it (after its first
batch the partition's producer state knows the transaction is open); the leader then holds a
**verification guard** for the producer (:meth:`ProducerStates.start_verification`), which any
transactional batch or marker appended for the producer clears, so a verification answered
before the transaction ended cannot let a late batch open a transaction its coordinator never
hears of (Kafka's ABA case: the append is then INVALID_TXN_STATE).

The question is AddPartitionsToTxn v4-5 with ``verify_only`` (v12+ Produce: without it, so the
coordinator adds the partitions, as Kafka 4.4's leaders ask for transaction version 2's
producers), to the broker leading the id's ``__transaction_state`` partition: a broker of this
process, of another ``coordkit serve`` process or a Kafka broker, over the inter-broker listener.
What the coordinator answers becomes what the producer is told, as Kafka's leader tells it:

=========================================  ================================================
the coordinator                             the producer (Produce v3-10 / v11 / v12+)
=========================================  ================================================
partition not in the transaction            INVALID_TXN_STATE / TRANSACTION_ABORTABLE / (added)
(TRANSACTION_ABORTABLE)
PRODUCER_FENCED                             INVALID_PRODUCER_EPOCH
CONCURRENT_TRANSACTIONS                     NOT_ENOUGH_REPLICAS (v12+: CONCURRENT_TRANSACTIONS)
NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
COORDINATOR_LOAD_IN_PROGRESS, no answer     NOT_ENOUGH_REPLICAS (the producer retries)
(NETWORK_EXCEPTION), no coordinator known
CLUSTER_AUTHORIZATION_FAILED (request)      INVALID_TXN_STATE
anything else                               itself
=========================================  ================================================

INVALID_TXN_STATE says "Partition was not added to the transaction" and NOT_ENOUGH_REPLICAS
"Unable to verify the partition has been added to the transaction. Underlying error: <the
coordinator's error>", Kafka's messages. A coordinator that does not serve v4 (an older Kafka)
is not asked: the batch is appended, as Kafka's leader goes on with a warning.

A group coordinator verifies a TxnOffsetCommit the same way (the group's ``__consumer_offsets``
partition must be in the transaction), the answer read by :func:`handler_code` and then
:func:`txn_offset_commit_error`, as Kafka 4.4's group coordinator reads it.
"""

from __future__ import annotations

import enum
import functools
import logging
import weakref
from collections.abc import Iterable

from coordkit.engine.states import TP
from coordkit.errors import StoreError
from coordkit.protocol import messages
from coordkit.protocol.errors import ProtocolError
from coordkit.serve import errors
from coordkit.serve.classes import nested
from coordkit.serve.context import BrokerContext
from coordkit.serve.control_plane.connection import BrokerConnections, UnservedVersionError
from coordkit.serve.transactions.coordinator import coordinator_of

log = logging.getLogger("coordkit.serve.transactions")

Request = messages.AddPartitionsToTxnRequest
Transaction = nested(Request, "AddPartitionsToTxnTransaction")
Topic = nested(Request, "AddPartitionsToTxnTopic")
TRANSACTION_STATE_TOPIC = "__transaction_state"
#: AddPartitionsToTxn's brokers' versions (KIP-890 part 1).
BROKER_VERSIONS = (4, 5)
NETWORK_EXCEPTION = 13
CLUSTER_AUTHORIZATION_FAILED = 31
#: Kafka's messages of the errors its leader makes of the coordinator's.
NOT_ADDED_MESSAGE = "Partition was not added to the transaction"
UNVERIFIED_MESSAGE = (
    "Unable to verify the partition has been added to the transaction. Underlying error: {}"
)
#: The coordinator's retriable answers a leader turns into NOT_ENOUGH_REPLICAS (older clients
#: retry it without refreshing metadata), by Kafka's names for the message.
_RETRIABLE = {
    NETWORK_EXCEPTION: "NETWORK_EXCEPTION",
    errors.COORDINATOR_LOAD_IN_PROGRESS: "COORDINATOR_LOAD_IN_PROGRESS",
    errors.COORDINATOR_NOT_AVAILABLE: "COORDINATOR_NOT_AVAILABLE",
    errors.NOT_COORDINATOR: "NOT_COORDINATOR",
}


class SupportedOperation(enum.Enum):
    """What a Produce version's client knows (Kafka's ``TransactionSupportedOperation``)."""

    #: v3-10: TRANSACTION_ABORTABLE unknown, told INVALID_TXN_STATE.
    DEFAULT_ERROR = "default"
    #: v11: TRANSACTION_ABORTABLE known.
    GENERIC_ERROR = "generic"
    #: v12+ (transaction version 2's producers): the leader adds the partition.
    ADD_PARTITION = "add"

    @classmethod
    def for_produce(cls, version: int) -> SupportedOperation:
        if version > 11:
            return cls.ADD_PARTITION
        return cls.GENERIC_ERROR if version > 10 else cls.DEFAULT_ERROR

    @classmethod
    def for_txn_offset_commit(cls, version: int) -> SupportedOperation:
        """TxnOffsetCommit v4 knows TRANSACTION_ABORTABLE; v5+ is transaction version 2's."""
        if version > 4:
            return cls.ADD_PARTITION
        return cls.GENERIC_ERROR if version > 3 else cls.DEFAULT_ERROR


class Unverified:
    """One partition's refusal: the producer's error code and Kafka's message, if any."""

    __slots__ = ("code", "message")

    def __init__(self, code: int, message: str | None = None) -> None:
        self.code = code
        self.message = message

    def __repr__(self) -> str:
        return f"Unverified({self.code}, {self.message!r})"


def handler_code(coordinator_code: int, operation: SupportedOperation) -> int:
    """A partition's code as the coordinator answered it, as the asking broker reads it (Kafka's
    ``AddPartitionsToTxnHandler``): PRODUCER_FENCED is INVALID_PRODUCER_EPOCH (what producers
    handle), TRANSACTION_ABORTABLE INVALID_TXN_STATE for clients that do not know it."""
    if coordinator_code == errors.PRODUCER_FENCED:
        return errors.INVALID_PRODUCER_EPOCH
    if coordinator_code == errors.TRANSACTION_ABORTABLE and (
        operation is SupportedOperation.DEFAULT_ERROR
    ):
        return errors.INVALID_TXN_STATE
    return coordinator_code


def produce_refusal(code: int, operation: SupportedOperation) -> Unverified:
    """What a producer is told of a partition its leader could not verify (``code``: as
    :func:`handler_code` gives it), Kafka's ``handleProduceAppend``'s translation."""
    if code == errors.INVALID_TXN_STATE:
        return Unverified(code, NOT_ADDED_MESSAGE)
    if code in _RETRIABLE or (
        code == errors.CONCURRENT_TRANSACTIONS and operation is not SupportedOperation.ADD_PARTITION
    ):
        name = _RETRIABLE.get(code, "CONCURRENT_TRANSACTIONS")
        return Unverified(errors.NOT_ENOUGH_REPLICAS, UNVERIFIED_MESSAGE.format(name))
    return Unverified(code)


def producer_error(coordinator_code: int, operation: SupportedOperation) -> Unverified:
    """What the producer is told of a partition the coordinator answered ``coordinator_code``."""
    return produce_refusal(handler_code(coordinator_code, operation), operation)


def txn_offset_commit_error(code: int) -> int:
    """What a TxnOffsetCommit is answered when its transaction was not verified (``code``: as
    :func:`handler_code` gives it): Kafka's group coordinator's
    ``CoordinatorOperationExceptionHelper`` turns a lost coordinator connection into
    COORDINATOR_LOAD_IN_PROGRESS (older clients retry it without looking the coordinator up
    again); the rest is answered as it is."""
    return errors.COORDINATOR_LOAD_IN_PROGRESS if code == NETWORK_EXCEPTION else code


class AddPartitionsToTxnManager:
    """Broker ``ctx``'s questions to transaction coordinators, one connection per coordinator
    broker (its requests one at a time)."""

    def __init__(self, ctx: BrokerContext, client_id: str = "coordkit-txn-verification") -> None:
        self.ctx = ctx
        self.connections = BrokerConnections(f"{client_id}-{ctx.broker_id}", ctx.connector,
                                             ctx.broker.store)  # fmt: skip

    async def verify(
        self,
        transactional_id: str,
        producer: tuple[int, int],
        partitions: Iterable[TP],
        operation: SupportedOperation,
    ) -> dict[TP, int]:
        """The partitions of ``partitions`` the coordinator did not verify, with their codes as
        :func:`handler_code` reads them; empty when every one is in the transaction."""
        wanted = sorted(set(partitions))
        coordinator = await self._coordinator(transactional_id)
        verify_only = operation is not SupportedOperation.ADD_PARTITION
        if coordinator is None:
            codes = dict.fromkeys(wanted, errors.COORDINATOR_NOT_AVAILABLE)
        elif coordinator == self.ctx.broker_id:
            # This broker coordinates the id: the answer its AddPartitionsToTxn would give.
            codes = await self._ask_own(transactional_id, producer, wanted, verify_only)
        else:
            send = functools.partial(self._send, coordinator, transactional_id, producer,
                                     wanted, verify_only)  # fmt: skip
            codes = await self.ctx.blocking(send)
        return {tp: handler_code(code, operation)
                for tp, code in codes.items() if code != errors.NONE}  # fmt: skip

    async def _ask_own(
        self, transactional_id: str, producer: tuple[int, int], wanted: list[TP], verify_only: bool
    ) -> dict[TP, int]:
        coordinator = coordinator_of(self.ctx)
        if verify_only:
            return await coordinator.verify_partitions(transactional_id, *producer, set(wanted))
        code = await coordinator.add_partitions(transactional_id, *producer, set(wanted))
        return dict.fromkeys(wanted, code)

    async def _coordinator(self, transactional_id: str) -> int | None:
        """The broker leading the id's ``__transaction_state`` partition, if any."""
        states = coordinator_of(self.ctx).states
        try:
            await states.read_partition_count()
        except StoreError as exc:
            log.info("broker %s: __transaction_state not read: %s", self.ctx.broker_id, exc)
        found = self.ctx.leadership(
            (TRANSACTION_STATE_TOPIC, states.partition_for(transactional_id))
        )
        if found is None or found[0] < 0:
            return None
        return found[0]

    def _send(
        self,
        coordinator: int,
        transactional_id: str,
        producer: tuple[int, int],
        partitions: list[TP],
        verify_only: bool,
    ) -> dict[TP, int]:
        """One AddPartitionsToTxn to ``coordinator`` (blocking): each partition's code, NONE
        for all when the coordinator does not serve the brokers' versions."""
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        request = Request(transactions=[Transaction(
            transactional_id=transactional_id, producer_id=producer[0],
            producer_epoch=producer[1], verify_only=verify_only,
            topics=[Topic(name=t, partitions=p) for t, p in by_topic.items()])])  # fmt: skip
        try:
            answer = self.connections.call(coordinator, request, BROKER_VERSIONS)
        except UnservedVersionError as exc:
            log.warning("broker %s: transactional produce to %s not verified: %s",
                        self.ctx.broker_id, partitions, exc)  # fmt: skip
            return dict.fromkeys(partitions, errors.NONE)
        except (OSError, ProtocolError, StoreError) as exc:
            log.info("broker %s: coordinator %s not asked to verify %s: %s",
                     self.ctx.broker_id, coordinator, transactional_id, exc)  # fmt: skip
            return dict.fromkeys(partitions, NETWORK_EXCEPTION)
        if answer.error_code:
            # A broker's client never sees CLUSTER_AUTHORIZATION_FAILED: the verification failed.
            code = answer.error_code
            if code == CLUSTER_AUTHORIZATION_FAILED:
                code = errors.INVALID_TXN_STATE
            log.warning("broker %s: coordinator %s refused to verify %s: error %s",
                        self.ctx.broker_id, coordinator, transactional_id, answer.error_code)  # fmt: skip
            return dict.fromkeys(partitions, code)
        codes: dict[TP, int] = {}
        for result in answer.results_by_transaction:
            if result.transactional_id != transactional_id:
                continue
            for topic in result.topic_results:
                for partition in topic.results_by_partition:
                    codes[(topic.name, partition.partition_index)] = partition.partition_error_code
        # A partition the coordinator did not answer for was not verified.
        return {tp: codes.get(tp, errors.INVALID_TXN_STATE) for tp in partitions}

    def close(self) -> None:
        self.connections.close()


_MANAGERS: weakref.WeakKeyDictionary[BrokerContext, AddPartitionsToTxnManager] = (
    weakref.WeakKeyDictionary()
)


def verifier_of(ctx: BrokerContext) -> AddPartitionsToTxnManager:
    """Broker ``ctx``'s verification manager, made at its first use."""
    found = _MANAGERS.get(ctx)
    if found is None:
        found = _MANAGERS[ctx] = AddPartitionsToTxnManager(ctx)
    return found


def close_verifiers(contexts: Iterable[BrokerContext]) -> None:
    for ctx in contexts:
        found = _MANAGERS.pop(ctx, None)
        if found is not None:
            found.close()
