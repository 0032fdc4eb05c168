"""The least loaded subscriber of each topic group while partitions move one at a time.

During the general sticky assignment's balancing Kafka needs, for a partition's topic, the subscriber
with the fewest partitions (ties: smallest member id), and the minimum count, after every single
move. Topics with the same subscribers share a *signature*; members with the same topics share a
*class*. Two trackers, chosen by how much one move would touch:

* :class:`ClassHeaps` (few classes per signature, the common case: a handful of distinct
  subscriptions): one lazy heap of ``(count, member)`` per class; a signature's minimum is the
  smallest of its classes' heap tops.
* :class:`SignatureCounts` (many classes, e.g. every member subscribing differently): per signature
  the minimum count and how many subscribers hold it, updated with array operations; the member
  itself is looked up only when a partition actually moves.

Both are told about a move after the counts changed by one (one member lost a partition, one
gained one).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import numpy as np

from coordkit_assignors.sticky_group import BoolArray, IntArray

#: Above this many (signature, class) pairs touched per move, use :class:`SignatureCounts`.
HEAP_WORK_LIMIT = 64


class ClassHeaps:
    """:ivar minimum: per signature, the smallest subscriber count (a list, for scalar reads).
    :ivar minimum_array: the same as an array (for scans)."""

    def __init__(
        self,
        size_list: list[int],
        sizes: IntArray,
        member_class: list[int],
        class_members: Sequence[IntArray],
        signature_classes: Sequence[tuple[int, ...]],
        signatures_of_class: Sequence[list[int]],
    ):
        self.size_list = size_list
        self.member_class = member_class
        self.signature_classes = signature_classes
        self.signatures_of_class = signatures_of_class
        self.heaps: list[list[tuple[int, int]]] = []
        for members in class_members:
            heap = [(size_list[m], m) for m in members.tolist()]
            heapq.heapify(heap)
            self.heaps.append(heap)
        self.minimum: list[int] = [
            min((self._top(k)[0] for k in classes), default=0) for classes in signature_classes
        ]
        self.minimum_array: IntArray = np.array(self.minimum, dtype=np.int64)

    def _top(self, k: int) -> tuple[int, int]:
        heap, sizes = self.heaps[k], self.size_list
        while heap[0][0] != sizes[heap[0][1]]:  # a stale entry: that member's count changed since
            heapq.heappop(heap)
        return heap[0]

    def least_loaded(self, signature: int) -> int:
        return min(self._top(k) for k in self.signature_classes[signature])[1]

    def moved(self, old: int, new: int) -> None:
        sizes, member_class = self.size_list, self.member_class
        heapq.heappush(self.heaps[member_class[old]], (sizes[old], old))
        heapq.heappush(self.heaps[member_class[new]], (sizes[new], new))
        old_class, new_class = member_class[old], member_class[new]
        signatures: Sequence[int] = self.signatures_of_class[old_class]
        if new_class != old_class:
            signatures = sorted({*signatures, *self.signatures_of_class[new_class]})
        for s in signatures:
            classes = self.signature_classes[s]
            low = (
                self._top(classes[0])[0]
                if len(classes) == 1
                else min(self._top(k)[0] for k in classes)
            )
            self.minimum[s] = low
            self.minimum_array[s] = low


class SignatureCounts:
    """Per signature: the minimum subscriber count and how many subscribers hold it."""

    def __init__(
        self,
        size_list: list[int],
        sizes: IntArray,
        member_class: list[int],
        signature_members: Sequence[IntArray],
        signatures_of_class: Sequence[list[int]],
    ):
        self.size_list = size_list
        self.sizes = sizes
        self.member_class = member_class
        self.signature_members = signature_members
        self.signatures_of_class = [np.array(s, dtype=np.int64) for s in signatures_of_class]
        self.minimum_array: IntArray = np.zeros(len(signature_members), dtype=np.int64)
        self.holders: IntArray = np.zeros(len(signature_members), dtype=np.int64)
        for s in range(len(signature_members)):
            self._recount(s)
        self.minimum: list[int] = self.minimum_array.tolist()

    def _recount(self, s: int) -> None:
        counts = self.sizes[self.signature_members[s]]
        low = int(counts.min()) if len(counts) else 0
        self.minimum_array[s] = low
        self.holders[s] = int(np.count_nonzero(counts == low))

    def least_loaded(self, signature: int) -> int:
        members = self.signature_members[signature]  # ascending ids: the first hit is the smallest
        hits = np.flatnonzero(self.sizes[members] == self.minimum_array[signature])
        return int(members[hits[0]])

    def moved(self, old: int, new: int) -> None:
        minimum, holders = self.minimum_array, self.holders
        # the member that lost a partition may set a new minimum, or join it
        count = self.size_list[old]
        touched = self.signatures_of_class[self.member_class[old]]
        current = minimum[touched]
        lower = touched[count < current]
        minimum[lower] = count
        holders[lower] = 1
        holders[touched[count == current]] += 1
        # the member that gained one leaves the minimum if it held it; an emptied minimum is recounted
        before = self.size_list[new] - 1
        touched_new = self.signatures_of_class[self.member_class[new]]
        left = touched_new[minimum[touched_new] == before]
        holders[left] -= 1
        for s in left[holders[left] == 0].tolist():
            self._recount(s)
        for s in np.union1d(lower, left).tolist():
            self.minimum[s] = int(minimum[s])


def choose_tracker(
    size_list: list[int],
    sizes: IntArray,
    member_class: list[int],
    class_members: Sequence[IntArray],
    signature_rows: BoolArray,
    signature_members: Sequence[IntArray],
) -> ClassHeaps | SignatureCounts:
    """:param signature_rows: ``signature_rows[s, k]``: does class ``k`` subscribe to signature ``s``."""
    classes_per_signature = signature_rows.sum(axis=1)
    # per class: the (signature, class) pairs a move of one of its members touches
    work = (signature_rows * classes_per_signature[:, None]).sum(axis=0)
    signatures_of_class = [np.flatnonzero(column).tolist() for column in signature_rows.T]
    if len(work) == 0 or int(work.max()) <= HEAP_WORK_LIMIT:
        signature_classes = [tuple(np.flatnonzero(row).tolist()) for row in signature_rows]
        return ClassHeaps(
            size_list, sizes, member_class, class_members, signature_classes, signatures_of_class
        )
    return SignatureCounts(size_list, sizes, member_class, signature_members, signatures_of_class)
