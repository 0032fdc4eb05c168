"""The store contract: sequential names have ten digits, increase, and are never reused."""

from __future__ import annotations

import re
import threading

from coordkit.store import MetadataStore
from coordkit.testing.backends import Capability, StoreFactory, requires
from coordkit.testing.store.base import StoreSuite

SEQUENTIAL_NAME = re.compile(r"^/q/job-(\d{10})$")


@requires(Capability.SEQUENTIAL_NODES)
class StoreSequentialTests(StoreSuite):
    """Sequential nodes are numbered as ZooKeeper numbers them: by the parent's child creations."""

    def test_sequential_names_have_ten_digits_and_increase(self, store: MetadataStore) -> None:
        store.create("/q", b"")
        made = [store.create("/q/job-", b"", sequential=True) for _ in range(5)]
        numbers = [int(SEQUENTIAL_NAME.match(p).group(1)) for p in made]  # type: ignore[union-attr]
        assert numbers[0] == 0
        assert numbers == sorted(numbers)
        assert len(set(numbers)) == 5, "sequential numbers must be unique"
        assert store.children("/q") == sorted(p.rsplit("/", 1)[1] for p in made)

    def test_sequence_counts_child_creations_not_deletions(self, store: MetadataStore) -> None:
        store.create("/q", b"")
        for name in ("a", "b"):
            store.create(f"/q/{name}", b"")
            store.delete(f"/q/{name}")
        # As real ZooKeeper does: two creations came before (deletions bump cversion, not the number).
        assert store.create("/q/job-", b"", sequential=True) == "/q/job-0000000002", (
            "sequential numbers count the parent's child creations: a deleted child's number is "
            "never reused"
        )
        assert store.exists("/q").cversion == 5  # type: ignore[union-attr]

    @requires(Capability.EPHEMERAL_NODES)
    def test_sequential_numbers_are_unique_under_concurrent_creators(
        self,
        open_session: StoreFactory,
    ) -> None:
        stores = [open_session() for _ in range(4)]
        stores[0].create("/q", b"")
        made: list[str] = []
        lock = threading.Lock()
        errors: list[BaseException] = []

        def worker(s: MetadataStore) -> None:
            try:
                for _ in range(25):
                    path = s.create("/q/job-", b"", sequential=True, ephemeral=True)
                    with lock:
                        made.append(path)
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(s,)) for s in stores for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, f"concurrent sequential creates failed: {errors[:3]!r}"
        assert len(made) == 200
        assert len(set(made)) == 200, "sequential numbers must be unique across sessions"
        assert all(SEQUENTIAL_NAME.match(p) for p in made)
        assert sorted(int(p[-10:]) for p in made) == list(range(200))
