"""The store contract across processes: a store shared by processes shows each one the others'
writes, ephemeral nodes and sequence numbers, and delivers their changes to its watchers.

Each other process is a child interpreter that opens the test's URL through coordkit's plugin
manager (as ``coordkit group describe`` in a second shell would) and obeys one-line commands.
"""

from __future__ import annotations

import queue
import subprocess
import sys
import threading

from coordkit.store import MetadataStore
from coordkit.testing.backends import Capability, requires
from coordkit.testing.store.base import Recorder, StoreSuite
from coordkit.testing.waiting import default_timeout, wait_for

#: The child: one command per line on stdin, one reply line per command on stdout.
CHILD = r"""
import sys
from coordkit.plugins import get_plugin_manager

store = get_plugin_manager().store_for(sys.argv[1])
try:
    for line in sys.stdin:
        command, *args = line.split()
        if command == "set":
            store.set(args[0], bytes.fromhex(args[1]))
            print("ok", flush=True)
        elif command == "create":
            print("ok", store.create(args[0], ephemeral=args[1] == "ephemeral"), flush=True)
        elif command == "sequential":
            made = [store.create(args[0], sequential=True) for _ in range(int(args[1]))]
            print("ok", *made, flush=True)
        else:
            print("error unknown command", command, flush=True)
finally:
    store.close()
"""


class ChildSession:
    """A session in another process on ``url``; :meth:`close` ends it (and the process)."""

    def __init__(self, url: str):
        self.process = subprocess.Popen(
            [sys.executable, "-c", CHILD, url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def send(self, command: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()

    def reply(self) -> list[str]:
        """The words after ``ok`` of the next reply; an AssertionError with the child's stderr
        when it fails, exits or does not answer within the kit's timeout."""
        try:
            line = self._lines.get(timeout=default_timeout())
        except queue.Empty:
            line = None
        if line is None or not line.startswith("ok"):
            self.process.kill()
            _, errors = self.process.communicate()
            raise AssertionError(f"the other process failed ({line!r}):\n{errors[-2000:]}")
        return line.split()[1:]

    def run(self, command: str) -> list[str]:
        self.send(command)
        return self.reply()

    def close(self) -> None:
        """End the child's session (``store.close()``) and wait for it to exit."""
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
        try:
            self.process.wait(timeout=default_timeout())
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError("the other process did not exit after closing its store") from None
        if self.process.returncode != 0:
            errors = self.process.stderr.read() if self.process.stderr else ""
            raise AssertionError(
                f"the other process exited with {self.process.returncode}:\n{errors[-2000:]}"
            )

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@requires(Capability.SHARED_ACROSS_PROCESSES)
class StoreProcessTests(StoreSuite):
    """Sessions in other processes share the tree, its watches and its sequence numbers."""

    def test_a_change_in_another_process_reaches_a_watcher_here(
        self, store: MetadataStore, store_url: str
    ) -> None:
        store.create("/shared", b"0")
        seen = Recorder()
        store.watch_data("/shared", seen)
        wait_for(lambda: seen.values() == [b"0"], what="initial state")
        child = ChildSession(store_url)
        try:
            child.run(f"set /shared {b'from-child'.hex()}")
        finally:
            child.close()
        assert store.get("/shared")[0] == b"from-child"
        wait_for(
            lambda: seen.values()[-1:] == [b"from-child"],
            what="the other process's change to reach the watch (watches across processes)",
        )

    @requires(Capability.EPHEMERAL_NODES)
    def test_another_process_s_ephemeral_node_goes_when_its_session_closes(
        self, store: MetadataStore, store_url: str
    ) -> None:
        store.create("/members", b"")
        seen = Recorder()
        store.watch_children("/members", seen)
        wait_for(lambda: seen.count() == 1, what="initial state")
        child = ChildSession(store_url)
        try:
            assert child.run("create /members/child ephemeral") == ["/members/child"]
            wait_for(
                lambda: seen.last().children == ("child",),
                what="the other process's ephemeral node to reach the watch",
            )
            stat = store.exists("/members/child")
            assert stat is not None
            assert stat.ephemeral_owner not in (0, store.session_id)
        finally:
            child.close()
        wait_for(
            lambda: seen.last().children == (),
            what="the ephemeral node of the closed session in the other process to go",
        )
        assert store.exists("/members/child") is None

    @requires(Capability.SEQUENTIAL_NODES)
    def test_sequential_numbers_are_unique_across_processes(
        self, store: MetadataStore, store_url: str
    ) -> None:
        store.create("/q", b"")
        children = [ChildSession(store_url) for _ in range(2)]
        try:
            for child in children:
                child.send("sequential /q/job- 25")
            made = [path for child in children for path in child.reply()]
            made += [store.create("/q/job-", sequential=True) for _ in range(5)]
        finally:
            for child in children:
                child.close()
        assert len(made) == 55
        assert len(set(made)) == 55, "sequential numbers must be unique across processes"
        assert sorted(int(p[-10:]) for p in made) == list(range(55))
        assert store.children("/q") == sorted(p.rsplit("/", 1)[1] for p in made)
