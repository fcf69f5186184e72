"""One scheduling cycle: admit as many pending jobs as fit, in a fair order, or preempt for them.

Order of work:
1. ClusterQueues or LocalQueues with stopPolicy HoldAndDrain evict their admitted jobs.
2. Every preemptor re-applies its hold on the quota and nodes it preempted for, so
   nobody else takes them meanwhile. Those whose victims are all gone are looked at
   first, one by one, each admitted on its hold when that still fits (judged afresh,
   one could land elsewhere, fail, and preempt its victims again next cycle).
3. Every ClusterQueue offers its head (priority, then submission time) to one
   global heap in Kueue's order (ordering.py): with fair sharing, heads whose
   subtrees would not borrow first, then by share; without, non-borrowing first,
   then priority and time). The best head is tried: admitted, preempting,
   or failed. A queue stays in the heap while it has heads left, so one cycle
   admits as many jobs per queue as fit. A failed head blocks its equivalence
   class for this cycle and, through the versions it failed at, for later cycles
   until capacity changes; under StrictFIFO it blocks its whole queue.
4. Holds are released; every pending job is left with a reason.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field

from phalanx.scheduler.backfill import Backfill
from phalanx.scheduler.cache import QueueInfo, Tree
from phalanx.scheduler.flavorassigner.flavors import FIT, NOFIT, PREEMPT, Assignment, shrink
from phalanx.scheduler.flavorassigner.partial import shrink_to_admit
from phalanx.scheduler.holding import hold_reasons, holding_head
from phalanx.scheduler.ordering import GlobalKey, global_key
from phalanx.scheduler.placement import Placement, PodGroup
from phalanx.scheduler.preemption.dominance import BlockStamp, Frontier
from phalanx.scheduler.preemption.preemptor import Outcome
from phalanx.scheduler.preemption.waiting import PreemptedCapacity, WaitingPreemptor
from phalanx.scheduler.provisioning_cycle import place_ready, try_hold
from phalanx.scheduler.queue import OrderedClass, PendingClass, QueuePending
from phalanx.scheduler.reasons import (
    QUEUED,
    node_reason,
    orphan_reason,
    quota_reason,
    stopped_reason,
    strict_fifo_reason,
    waiting_reason,
)
from phalanx.scheduler.reservation import CohortReservation, held_reason
from phalanx.scheduler.state import HOLD_PREFIX, State
from phalanx.scheduler.types import (
    Admission,
    CycleResult,
    PendingReason,
    PodSetAssignment,
    Preemption,
    PreemptionReason,
)
from phalanx.scheduler.workload import FR, Workload

# HELD: it failed because a higher-priority job keeps what it would borrow (reservation.py).
ADMITTED, PREEMPTING, FAILED, HELD = "admitted", "preempting", "failed", "held"


def blocked_at(cls: PendingClass, tree_now: int, node_now: int) -> bool:
    """Whether ``cls`` is still blocked at these capacity versions (``PendingClass.blocked``)."""
    stamp = cls.blocked
    if stamp is None:
        return False
    tree_v, node_v = stamp
    if tree_v is not None and tree_v != tree_now:
        return False
    return node_v is None or node_v == node_now


@dataclass(slots=True)
class QueueTurn:
    """A ClusterQueue during one cycle: its classes in order, each with its cursor (the
    members skipped, ``PendingClass.cursor``: a class has one turn a cycle).

    The classes come from the queue's order as it was when the cycle started (``order``,
    walked from ``pos``), merged with those already looked at whose cursor moved on
    (``heap``). A class blocked at the versions the cycle started with (``tree_now``,
    ``node_now``; a StrictFIFO queue skips none, ``skip_blocked``) is passed over: it is
    as if the order had been filtered at the start, with no sort and no heap of every
    class."""

    info: QueueInfo
    pending: QueuePending
    order: list[OrderedClass]
    skip_blocked: bool
    tree_now: int
    node_now: int
    pos: int = 0
    heap: list[OrderedClass] = field(default_factory=list)
    done: bool = False
    frontier: Frontier | None = None  # the queue's failures in this cycle
    strict: bool = False  # StrictFIFO this cycle: by its setting, or held for ``holder``
    holder: Workload | None = None  # the big head that holds the queue (holdForLargeGangs)

    def __post_init__(self) -> None:
        self.advance()

    def advance(self) -> None:
        """Move ``pos`` to the next class of ``order`` that is not blocked."""
        order, pos = self.order, self.pos
        end = len(order)
        if self.skip_blocked:
            tree_now, node_now = self.tree_now, self.node_now
            while pos < end and blocked_at(order[pos][2], tree_now, node_now):
                pos += 1
        if pos < end:
            order[pos][2].cursor = 0  # a cycle starts every class at its head
        self.pos = pos

    def push(self, cls: PendingClass) -> None:
        start = cls.cursor
        if start < len(cls.keys):
            heapq.heappush(self.heap, (cls.keys[start], cls.serial, cls))

    def _heap_first(self) -> bool:
        """Whether the next class comes from ``heap`` rather than ``order`` (there is one)."""
        heap = self.heap
        if self.pos >= len(self.order):
            return True
        if not heap:
            return False
        first, entry = heap[0], self.order[self.pos]
        return first[0] < entry[0] or (first[0] == entry[0] and first[1] < entry[1])

    def top(self) -> PendingClass | None:
        if self._heap_first():
            return self.heap[0][2] if self.heap else None
        return self.order[self.pos][2]

    def pop(self) -> PendingClass:
        if self._heap_first():
            return heapq.heappop(self.heap)[2]
        cls = self.order[self.pos][2]
        self.pos += 1
        self.advance()
        return cls

    def clear(self) -> None:
        self.heap = []
        self.pos = len(self.order)

    def peek(self) -> Workload | None:
        cls = self.top()
        return None if cls is None else cls.wls[cls.cursor]


class Cycle:
    def __init__(self, state: State, backfill: Backfill) -> None:
        self.st = state
        # Room kept for jobs that waited long (backfill.py); the scheduler owns it, as it
        # outlives cycles and configurations (and backfill.py reads the state).
        self.backfill = backfill
        self.result = CycleResult()
        self.holds: dict[str, PreemptedCapacity] = {}  # applied for this cycle, by preemptor
        # What each hold charged, and the victims whose quota it counts on (apply_hold).
        self.charged: dict[str, tuple[dict[FR, int], list[str]]] = {}
        # Each quota tree this cycle admitted into, with its version before the first of those
        # admissions: they are no preemption candidates until the next cycle, so a job that
        # fails within its own quota there is stamped with that version and looked at again.
        self.fresh_trees: dict[Tree, int] = {}
        # The stopped LocalQueues (few configurations have any); the configuration cannot
        # change during a cycle.
        self.closed = {name for name, lq in state.config.local_queues.items()
                       if lq.stop_policy != "None"}

    # ------------------------------------------------------------------ reasons
    def set_reason(self, wl: Workload, reason: PendingReason) -> None:
        """A reason for this job alone, until its class or queue gets a later one."""
        wl.reason, wl.reason_serial = reason, self.st.tick_reason()

    def class_reason(self, cls: PendingClass, reason: PendingReason) -> None:
        """A reason for every member of the class that has no later one of its own."""
        cls.reason, cls.reason_serial = reason, self.st.tick_reason()
        cls.settled = None

    # ------------------------------------------------------------------ the cycle
    def run(self) -> CycleResult:
        st = self.st
        st.cycle_no += 1
        st.preemptor.admitted_by = st.admit_seq
        st.preemptor.planes_of.clear()  # (jobs placed since the last cycle are elsewhere)
        self.drain()
        if st.provisioning.holds:
            place_ready(self)
        if st.reservations:
            st.reservations.keep_pending(st.jobs)
        nominated = self.settle_waiting()
        if self.backfill.active:
            self.backfill.begin(st, st.now)  # room kept for jobs that waited long (backfill.py)
        for wl in nominated:
            hold = self.holds.get(wl.name)
            if hold is not None:
                self.release_hold(wl.name)
            info = st.infos.get(wl.cluster_queue)
            cls = st.queues.class_of(wl)
            if info is not None and cls is not None and self.queue_open(info, wl.local_queue):
                if self.admit_as_held(wl, info, hold):
                    continue
                outcome, reason, _ = self.evaluate(wl, info)
                if outcome in (FAILED, HELD) and reason is not None:
                    self.set_reason(wl, reason)
                    cls = st.queues.class_of(wl)
                    if cls is not None:  # let the loop judge its class on its own turn
                        cls.blocked = None
        self.admit_loop()
        if self.backfill.plans:
            self.backfill.end(st)
        self.release_holds()
        self.report_rest()
        return self.result

    def drain(self) -> None:
        st = self.st
        # Walking every admitted job costs more than the rest of a busy cycle: look only
        # when some queue is actually draining.
        if not any(i.stop_policy == "HoldAndDrain" for i in st.infos.values()) and not any(
            lq.stop_policy == "HoldAndDrain" for lq in st.config.local_queues.values()
        ):
            return
        for cq in sorted(st.admitted):
            info = st.infos.get(cq)
            jobs = st.admitted[cq].jobs
            for name in sorted(jobs):
                wl = jobs[name]
                if wl.terminating:
                    continue
                lq = st.config.local_queues.get(wl.local_queue)
                if info is not None and info.stop_policy == "HoldAndDrain":
                    why = f"ClusterQueue {cq} is stopped with stopPolicy HoldAndDrain"
                elif lq is not None and lq.stop_policy == "HoldAndDrain":
                    why = f"LocalQueue {lq.name} is stopped with stopPolicy HoldAndDrain"
                else:
                    continue
                st.mark_terminating(wl)
                self.result.preemptions.append(
                    Preemption(name, "", PreemptionReason.QUEUE_STOPPED, f"evicted: {why}")
                )

    def settle_waiting(self) -> list[Workload]:
        """Preemptors whose victims left are returned (their capacity stays applied until
        their turn); the others keep theirs."""
        st = self.st
        nominated: list[Workload] = []
        for waiter in sorted(st.waiting.values(), key=lambda w: w.wl.order_key):
            wl = waiter.wl
            alive = [v for v in waiter.victims if v in st.jobs and st.jobs[v].admitted]
            # Kept until the job's own turn below, so no other preemptor takes it.
            self.apply_hold(wl.name, waiter.capacity, alive)
            if not alive:
                del st.waiting[wl.name]
                nominated.append(wl)
                continue
            waiter.victims = tuple(alive)
            self.set_reason(wl, waiting_reason(alive))
        return nominated

    def admit_as_held(self, wl: Workload, info: QueueInfo,
                      hold: PreemptedCapacity | None) -> bool:
        """Admit a preemptor whose victims are gone on the flavors and nodes it preempted for,
        when they are still free. Judged afresh, it could land on another flavor whose nodes
        are full, let its victims back in and preempt them again, cycle after cycle."""
        st = self.st
        if (hold is None or hold.cluster_queue != info.name
                or hold.config_generation != st.config_generation):
            return False
        node, cache = info.node, st.cache
        if any(v > cache.available(node, fr) for fr, v in hold.usage.items()):
            return False
        if not st.pool.fits_as_placed(hold.groups, hold.placement, wl.topology):
            return False
        if st.reservations:
            st.reservations.release(wl)
            if self.reserved_for_another(wl, info, hold.usage) is not None:
                return False  # evaluate() says so
        self.admit_on(wl, info, hold.usage, hold.groups, hold.placement, hold.flavors)
        return True

    def reserved_for_another(self, wl: Workload, info: QueueInfo, usage: dict[FR, int]
                             ) -> tuple[CohortReservation, list[FR]] | None:
        """The cohort reservation of a job ranked before ``wl`` that keeps what ``usage``
        would borrow, with the flavor-resources at stake."""
        found = self.st.reservations.hold_on(wl, info, usage, self.st.cache)
        if found is None or self.ranks_before(wl, info, found[0].holder):
            return None
        return found

    def apply_hold(self, name: str, hold: PreemptedCapacity, victims: Sequence[str]) -> None:
        """Charge what the preemptor will use, less what its victims of its own queue still
        hold: that quota is already counted, by them, until they leave. (Charging it twice
        made the cohort look full, so the next queue's head could not preempt within its
        own nominal quota in the same cycle.) Those victims are then promised to it: no
        other preemptor counts on them."""
        st = self.st
        freed: dict[FR, int] = {}
        promised: list[str] = []
        for victim in victims:
            job = st.jobs.get(victim)
            if job is None or not job.admitted or job.cluster_queue != hold.cluster_queue:
                continue
            promised.append(victim)
            for fr, amount in job.usage.items():
                freed[fr] = freed.get(fr, 0) + amount
        charged = {fr: v - freed.get(fr, 0) for fr, v in hold.usage.items()
                   if v > freed.get(fr, 0)}
        st.cache.charge(hold.cluster_queue, charged, 1, bump=False)
        st.pool.reserve(HOLD_PREFIX + name, hold.groups, hold.placement)
        self.holds[name] = hold
        self.charged[name] = (charged, promised)
        st.preemptor.promised.update(promised)

    def release_hold(self, name: str) -> None:
        hold = self.holds.pop(name)
        charged, promised = self.charged.pop(name)
        self.st.cache.charge(hold.cluster_queue, charged, -1, bump=False)
        self.st.pool.release(HOLD_PREFIX + name)
        self.st.preemptor.promised.difference_update(promised)

    def release_holds(self) -> None:
        for name in list(self.holds):
            self.release_hold(name)

    def queue_open(self, info: QueueInfo, local_queue: str) -> bool:
        return info.stop_policy == "None" and local_queue not in self.closed

    # ------------------------------------------------------------------ ordering
    def global_key(self, wl: Workload, info: QueueInfo) -> GlobalKey:
        return global_key(wl, info, self.st.cache, self.st.fair_sharing)

    def ranks_before(self, wl: Workload, info: QueueInfo, other: Workload) -> bool:
        other_info = self.st.infos.get(other.cluster_queue)
        if other_info is None:
            return True
        return self.global_key(wl, info) < self.global_key(other, other_info)

    def stamp(self, info: QueueInfo, assignment: Assignment | None) -> BlockStamp:
        """The capacity versions whose change could let a failed head through."""
        tree = info.node.tree
        nodes = self.st.node_free_version
        if assignment is None or assignment.no_flavor:
            return (tree.free_version, None)
        any_v = tree.any_version
        if not assignment.borrowing:
            # Within its own quota it may reclaim from this cycle's admissions next cycle.
            # (Not when it would borrow: under fair sharing, two borrowing queues whose shares
            # cross could then take turns preempting each other. So a borrowing job that failed
            # behind a borrower admitted this cycle waits for the tree's next change.)
            any_v = self.fresh_trees.get(tree, any_v)
        tree_v = any_v if info.can_preempt else tree.free_version
        if assignment.mode == FIT:  # quota fits, nodes do not
            return (any_v if info.can_preempt else None, nodes)
        if assignment.mode == PREEMPT and info.can_preempt:
            return (tree_v, nodes)
        return (tree_v, None)

    def still_blocked(self, info: QueueInfo, cls: PendingClass) -> bool:
        return blocked_at(cls, self.tree_now(info), self.st.node_free_version)

    @staticmethod
    def tree_now(info: QueueInfo) -> int:
        """The version of the queue's tree that its blocked classes' stamps are compared to."""
        tree = info.node.tree
        return tree.any_version if info.can_preempt else tree.free_version

    # ------------------------------------------------------------------ admission loop
    def admit_loop(self) -> None:
        st = self.st
        turns: list[tuple[GlobalKey, int, QueueTurn]] = []
        stopped: list[tuple[PendingClass, PendingReason]] = []
        closed = self.closed  # their classes are passed over
        node_now = st.node_free_version
        for index, name in enumerate(sorted(st.queues.queues)):
            pending = st.queues.queues[name]
            if not pending.count:
                continue
            info = st.infos[name]
            # A copy: admissions during the cycle reorder the queue's own list.
            if info.stop_policy != "None" or closed:
                order = self.open_classes(info, pending, closed, stopped)
            else:
                order = list(pending.ordered)
            # holdForLargeGangs makes the queue strict for this cycle only: ``info`` is the
            # ClusterQueue's own setting and stays as it is.
            holder = holding_head(info, order[0][2], st.now) if info.hold_gpus and order \
                else None
            strict = info.strict or holder is not None
            turn = QueueTurn(info, pending, order, not strict, self.tree_now(info),
                             node_now, strict=strict, holder=holder)
            head = self.next_head(turn)
            if head is not None:
                turns.append((self.global_key(head, info), index, turn))
        heapq.heapify(turns)
        while turns:
            _, index, turn = heapq.heappop(turns)
            while True:
                self.step(turn)
                head = self.next_head(turn)
                if head is None:
                    break
                key = self.global_key(head, turn.info)
                # The queue goes on at once when it would come straight back out of the heap
                # (entries never tie: indexes differ), which skips a push and a pop.
                if turns and (turns[0][0], turns[0][1]) < (key, index):
                    heapq.heappush(turns, (key, index, turn))
                    break
        # Given last, so a StrictFIFO block of the same queue does not cover them.
        for cls, why in stopped:
            self.class_reason(cls, why)

    def open_classes(self, info: QueueInfo, pending: QueuePending, closed: set[str],
                     stopped: list[tuple[PendingClass, PendingReason]]) -> list[OrderedClass]:
        """The queue's classes in order, less those of a stopped ClusterQueue or LocalQueue,
        which are added to ``stopped`` with their reason."""
        st = self.st
        shut: set[int] = set()
        for cls in pending.classes.values():
            local_queue: str = cls.key[0]  # type: ignore[assignment]
            if info.stop_policy != "None":
                why = stopped_reason("ClusterQueue", pending.name, info.stop_policy)
            elif local_queue in closed:
                lq = st.config.local_queues[local_queue]
                why = stopped_reason("LocalQueue", lq.name, lq.stop_policy)
            else:
                continue
            stopped.append((cls, why))
            shut.add(cls.serial)
        return [entry for entry in pending.ordered if entry[1] not in shut]

    def next_head(self, turn: QueueTurn) -> Workload | None:
        """The queue's next head that needs a real evaluation (None: the queue is done).
        Heads settled on the way change no capacity, so they are done at once, out of the
        global order; only the head returned waits for its turn."""
        while not turn.done and self.settle(turn):
            pass
        return None if turn.done else turn.peek()

    def settle(self, turn: QueueTurn) -> bool:
        """Deal with the queue's current head if that takes no evaluation: it already holds
        capacity, or a failure of its own queue in this cycle settles its class. Neither
        depends on other queues, so it may be done at any point of the cycle."""
        cls = turn.top()
        if cls is None:
            return False
        start = cls.cursor
        wl = cls.wls[start]
        if wl.name in self.st.waiting:  # has a hold already; the rest of its class goes on
            turn.pop()
            cls.cursor = start + 1
            if turn.strict:
                self.block_strict(turn, wl)
                return True
            turn.push(cls)
            return True
        frontier = turn.frontier
        settled = frontier.match(wl) if frontier is not None else None
        if settled is None:
            return False
        turn.pop()
        cls.blocked = settled.stamp  # it fits no sooner than the job that settles it
        cls.reason, cls.settled, cls.reason_serial = None, (wl, settled), self.st.tick_reason()
        if turn.strict:
            self.block_strict(turn, wl)
        return True

    def step(self, turn: QueueTurn) -> None:
        """Try the queue's current head (one ``settle`` has turned down); advance its class."""
        cls = turn.pop()
        start = cls.cursor
        wl = cls.wls[start]
        info = turn.info
        reason = cls.latest_reason() if turn.strict else None
        if reason is not None and self.still_blocked(info, cls):
            self.set_reason(wl, reason)  # the head; everyone behind it waits for it
            self.block_strict(turn, wl)
            return
        outcome, reason, assignment = self.evaluate(wl, info)
        if outcome == ADMITTED:
            turn.push(cls)
            return
        if outcome == PREEMPTING:
            cls.cursor = start + 1
            if turn.strict:
                self.block_strict(turn, wl)
                return
            turn.push(cls)
            return
        assert reason is not None
        if turn.strict:
            cls.reason, cls.settled = reason, None
            self.set_reason(wl, reason)
            self.block_strict(turn, wl)
            return
        if outcome == FAILED:
            # Not a held job: a bigger one may be judged on another flavor, within its
            # own quota, so a hold settles nothing for it.
            if turn.frontier is None:
                turn.frontier = Frontier(self.st.demands)
            turn.frontier.add(wl, reason, cls.blocked, assignment)
        self.class_reason(cls, reason)

    def block_strict(self, turn: QueueTurn, head: Workload) -> None:
        """StrictFIFO: everything behind a head that cannot go waits for it."""
        turn.done = True
        turn.clear()
        pending = turn.pending
        head_reason = self.st.reason_of(head)
        if turn.holder is None:
            why, pending.strict_unnamed = strict_fifo_reason(turn.info.name, head.name,
                                                             head_reason), None
        else:
            why, pending.strict_unnamed = hold_reasons(turn.info, head, head_reason)
        pending.strict_reason, pending.strict_head = why, head.name
        pending.strict_local_queue = head.local_queue
        pending.strict_serial = self.st.tick_reason()

    # ------------------------------------------------------------------ one job
    def evaluate(self, wl: Workload, info: QueueInfo
                 ) -> tuple[str, PendingReason | None, Assignment]:
        """``judge``, with a reservation lifted for its holder or a job that ends before it."""
        backfill = self.backfill
        lifted = backfill.lift(self.st, wl) if backfill.plans else None
        try:
            return self.judge(wl, info)
        finally:
            if lifted is not None:
                backfill.restore(self.st, lifted, wl)

    def judge(self, wl: Workload, info: QueueInfo
              ) -> tuple[str, PendingReason | None, Assignment]:
        """The outcome, the reason when it failed, and the assignment it was judged on. The
        full size is admitted or preempted for before a job shrinks (flavorassigner/partial.py)."""
        st = self.st
        a = st.assigner.assign(wl, info)
        reservations = st.reservations
        if reservations:
            reservations.release(wl)  # it holds again below if it fails the same way
        held = self.held(wl, info, a)
        if held is not None:
            return held
        if a.mode == FIT and a.placement is not None:
            self.admit_on(wl, info, a.usage, a.groups, a.placement,
                          tuple(c.flavors for c in a.choices))
            return ADMITTED, None, a
        cls = st.queues.class_of(wl)
        if a.no_flavor:
            if cls is not None:
                cls.blocked = self.stamp(info, a)
            return FAILED, quota_reason(info, st.cache, a), a
        provisioning_note = ""
        if a.placement is None and st.provisioning.flavors:
            note = try_hold(self, wl, info)
            if note is None:  # holds its quota while its nodes are bought
                if cls is not None:
                    cls.blocked = None
                return ADMITTED, None, a
            provisioning_note = note
        outcome: Outcome | None = None
        if a.mode != NOFIT:
            outcome = st.preemptor.find(wl, info, a)
            if outcome.targets:
                assert outcome.placement is not None
                self.preempt(wl, info, a, outcome.targets, outcome.placement)
                if cls is not None:
                    cls.blocked = None
                return PREEMPTING, None, a
        if wl.shrinkable:
            found = shrink_to_admit(st.assigner, st.preemptor, wl, info)
            if found is not None:
                smaller, made_room = found
                held = self.held(wl, info, smaller)
                if held is not None:
                    return held
                if made_room is None:
                    assert smaller.placement is not None
                    self.admit_on(wl, info, smaller.usage, smaller.groups, smaller.placement,
                                  tuple(c.flavors for c in smaller.choices))
                    return ADMITTED, None, smaller
                assert made_room.targets and made_room.placement is not None
                self.preempt(wl, info, smaller, made_room.targets, made_room.placement)
                if cls is not None:
                    cls.blocked = None
                return PREEMPTING, None, smaller
        if cls is not None:
            cls.blocked = self.stamp(info, a)
        if outcome is None:  # NOFIT
            frs = sorted({(s.flavor, s.resource) for s in a.shortfalls if not s.never})
            disabled = st.preemptor.would_have_candidates(wl, info, frs) if frs else ""
            reservations.offer(wl, info, a, st.cache)
            return FAILED, quota_reason(info, st.cache, a, "", disabled), a
        if a.mode == FIT:
            why = node_reason(info, a)
            if provisioning_note:
                why = PendingReason(why.code, why.message + provisioning_note)
            return FAILED, why, a
        disabled = ""
        note = ""
        frs = [fr for fr, v in a.usage.items() if v > st.cache.available(info.node, fr)]
        if not outcome.candidates:
            disabled = st.preemptor.would_have_candidates(wl, info, frs)
        else:
            note = (f"preempting the {outcome.candidates} job"
                    f"{'s' if outcome.candidates != 1 else ''} its policies allow would not "
                    "make it fit")
            if st.pool.index.multi_plane:  # (victims come from one plane: preemption/preemptor.py)
                note += " within one compute plane"
        if a.mode == PREEMPT:
            reservations.offer(wl, info, a, st.cache)
        return FAILED, quota_reason(info, st.cache, a, note, disabled), a

    def held(self, wl: Workload, info: QueueInfo, a: Assignment
             ) -> tuple[str, PendingReason | None, Assignment] | None:
        """HELD when ``a`` would borrow what the cohort keeps for a job ranked before."""
        if not self.st.reservations or not a.borrowing or a.no_flavor:
            return None
        found = self.reserved_for_another(wl, info, a.usage)
        if found is None:
            return None
        cls = self.st.queues.class_of(wl)
        if cls is not None:
            cls.blocked = None  # looked at again while the hold lasts
        return HELD, held_reason(*found), a

    def admit_on(self, wl: Workload, info: QueueInfo, usage: dict[FR, int],
                 groups: tuple[PodGroup, ...], placement: Placement,
                 flavors: tuple[dict[str, str], ...]) -> None:
        st = self.st
        node = info.node
        borrowing = any(st.cache.borrowing_with(node, fr, v) for fr, v in usage.items())
        admission = Admission(
            job=wl.name,
            cluster_queue=info.name,
            pod_sets=tuple(
                PodSetAssignment(ps.name, n, dict(f), names)
                for ps, f, n, names in zip(wl.pod_sets, flavors, placement.counts,
                                           placement.nodes, strict=True)
            ),
            borrowing=borrowing,
        )
        tree = node.tree
        if tree not in self.fresh_trees:
            self.fresh_trees[tree] = tree.any_version
        st.queues.discard(wl)
        st.unreported.pop(wl.name, None)
        st._admit(wl, admission, dict(usage))
        st.pool.reserve(wl.name, groups, placement)
        self.result.admissions.append(admission)

    def preempt(self, wl: Workload, info: QueueInfo, a: Assignment, targets: list,
                placement: Placement) -> None:
        st = self.st
        names: list[str] = []
        for t in targets:
            victim = t.wl
            names.append(victim.name)
            if victim.terminating:
                continue
            st.mark_terminating(victim)
            victim.preempted_by = wl.name
            self.result.preemptions.append(Preemption(
                victim=victim.name, preemptor=wl.name, reason=t.reason,
                message=(f"preempted by {wl.name} (ClusterQueue {info.name}, priority "
                         f"{wl.priority}) from ClusterQueue {victim.cluster_queue}, priority "
                         f"{victim.priority}: {t.reason}"),
            ))
        if placement.counts != a.counts:  # partial admission: hold what the pods take
            shrink(a, info, placement.counts)
        capacity = PreemptedCapacity(info.name, dict(a.usage), a.groups, placement,
                                     tuple(c.flavors for c in a.choices), st.config_generation)
        st.waiting[wl.name] = WaitingPreemptor(wl, tuple(names), capacity)
        self.apply_hold(wl.name, capacity, names)
        self.set_reason(wl, waiting_reason(names))

    # ------------------------------------------------------------------ leftovers
    def report_rest(self) -> None:
        st = self.st
        for wl in st.orphans.values():
            self.set_reason(wl, orphan_reason(wl.local_queue))
        for wl in st.unreported.values():
            if wl.admitted or wl.name in st.orphans or wl.name in st.waiting:
                continue
            cls = st.queues.class_of(wl)
            if cls is not None and cls.settled is not None and cls.reason_serial > wl.reason_serial:
                continue  # settled this cycle (asked first: it spares writing the sentence)
            if st.reason_of(wl).code != QUEUED.code:
                continue  # told something this cycle
            if cls is not None and (cls.reason is not None or cls.settled is not None):
                wl.reason, wl.reason_serial = None, 0  # its class's reason holds for it too
            else:
                self.set_reason(wl, PendingReason(
                    QUEUED.code, "not looked at yet: its ClusterQueue had no turn"))
        st.unreported.clear()
