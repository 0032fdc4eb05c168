"""Process-chaos schedules: seeded sequences of faults on ``coordkit serve --broker-id`` processes,
in :mod:`chaos.schedule`'s :class:`Schedule` and :class:`Step` (generated from the seed alone, so
printing the seed is enough to replay one).

Shape: :data:`MIN_FAULTS` to :data:`MAX_FAULTS` faults, one at a time, each on a broker (or, for a
cut between brokers, a pair) chosen by the seed, held for a while and then undone, with the
workload running between them (a step's ``pause_after``). One fault at a time, so two of the three
replicas stay together and acks=all with ``min.insync.replicas=2`` can go on once the ISR shrinks:
a schedule runs well under a minute.
"""

from __future__ import annotations

import random

from chaos.schedule import Schedule, Step

BROKERS = (1, 2, 3)
MIN_FAULTS = 2
MAX_FAULTS = 3

KILL_PROCESS = "kill-9-process"
RESTART_PROCESS = "restart-process"
PAUSE_PROCESS = "sigstop-process"
RESUME_PROCESS = "sigcont-process"
CUT_STORE = "cut-process-from-store"
RESTORE_STORE = "restore-process-store-link"
CUT_PEERS = "cut-brokers-apart"
RESTORE_PEERS = "restore-link-between-brokers"

#: Every fault kind, and the step that undoes it.
FAULTS = {
    KILL_PROCESS: RESTART_PROCESS,
    PAUSE_PROCESS: RESUME_PROCESS,
    CUT_STORE: RESTORE_STORE,
    CUT_PEERS: RESTORE_PEERS,
}
FAULT_ACTIONS = frozenset(FAULTS)


def generate_process_schedule(
    seed: int, backend: str, *, session_timeout: float, kinds: tuple[str, ...] = tuple(FAULTS)
) -> Schedule:
    """The schedule of ``seed`` on ``backend`` whose sessions last ``session_timeout`` s."""
    rng = random.Random(seed)
    steps: list[Step] = []
    for _ in range(rng.randint(MIN_FAULTS, MAX_FAULTS)):
        kind = rng.choice(kinds)
        broker = rng.choice(BROKERS)
        if kind == PAUSE_PROCESS:
            # Past the session timeout: the store drops the process's session while it sleeps.
            hold = round(session_timeout * rng.uniform(1.2, 1.6), 2)
        elif kind == CUT_STORE:
            # Sometimes shorter than the session timeout (the session survives), sometimes longer.
            hold = round(rng.uniform(0.3, 1.6 * session_timeout), 2)
        elif kind == CUT_PEERS:
            # Longer than replica.lag.time.max.ms (3 s) at times: a follower leaves the ISR.
            hold = round(rng.uniform(1.0, 6.0), 2)
        else:
            hold = round(rng.uniform(0.2, 2.0), 2)
        peer = rng.choice([b for b in BROKERS if b != broker]) if kind == CUT_PEERS else None
        steps.append(Step(kind, broker=broker, hold=hold, peer=peer))
        steps.append(
            Step(
                FAULTS[kind], broker=broker, pause_after=round(rng.uniform(1.0, 3.0), 2), peer=peer
            )
        )
    return Schedule(seed, backend, tuple(steps))
