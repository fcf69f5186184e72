"""Preemption: which admitted jobs to evict so a pending one can run, and only if it then can.

Candidates follow Kueue: with withinClusterQueue, lower-priority jobs of the
same queue (LowerOrNewerEqualPriority adds equal-priority jobs submitted later);
with reclaimWithinCohort, jobs of other queues of the cohort tree that are
borrowing the resources in short supply (Any: whatever their priority). They are
ordered: already terminating first, other queues before one's own, lowest
priority, most recently admitted. Candidates are removed one by one (in a what-if
of the quota tree) until the preemptor fits, quota and nodes both (``NodePool.place``
with the victims' capacity ``freed``); then the set is minimised by putting
candidates back, last but one first, while it still fits. Classic mode follows
Kueue's rules for borrowing (only from one's own queue unless borrowWithinCohort
allows it, below its maxPriorityThreshold); fair-sharing mode walks queues by
share with the two fair-sharing strategies. This module finds the candidates and
rules out hopeless searches; the search itself is ``search.VictimSearch``.

With nodes of two or more compute planes (label ``phalanx.dev/plane``) the victims all
come from the one plane the preemptor will run on. The search over every candidate is
kept when its victims are all there; otherwise a search per plane, each with the
candidates running there and the preemptor's pods pinned there, and the plane whose
victims cost least wins. Freeing quota on one cluster to start a job on another would
stop work that gives the preemptor no room it could not have had anyway.
"""

from __future__ import annotations

from collections.abc import Iterator

from phalanx.scheduler.admitted import AdmittedJobs, least_work_lost
from phalanx.scheduler.cache import NEVER, QueueInfo, QuotaCache, QuotaNode, Tree
from phalanx.scheduler.fairsharing import (
    dominant_share,
    keeps_share,
    max_removal,
    removal_limits,
)
from phalanx.scheduler.flavorassigner.flavors import (
    NO_CANDIDATES,
    PREEMPT,
    PREEMPT_IN_QUEUE,
    RECLAIM,
    Assignment,
)
from phalanx.scheduler.placement import NodePool, Placement, PodGroup
from phalanx.scheduler.preemption.freed import FreedRoom
from phalanx.scheduler.preemption.protection import Protection
from phalanx.scheduler.preemption.search import Source, Target, VictimSearch
from phalanx.scheduler.preemption.search_tree import TreeFairSearch, in_tree
from phalanx.scheduler.workload import FR, UsageKey, Workload
from phalanx.spec.planes import PLANE_LABEL


class _TreeMemo:
    """A cohort tree's preemption look-ups at one usage version."""

    __slots__ = ("after", "borrowers", "counted", "shares", "tallies", "version")

    def __init__(self, version: int) -> None:
        self.version = version
        self.borrowers: dict[tuple[FR, ...], list[QuotaNode]] = {}
        self.tallies: dict[tuple[str, int | None, tuple[FR, ...]], tuple[int, list[int]]] = {}
        self.shares: dict[str, float] = {}
        # (queue, usage) -> the queue's share once a job holding that usage left it.
        self.after: dict[tuple[str, UsageKey], float] = {}
        self.counted: dict[tuple[object, ...], tuple[list[Source], int, dict[FR, int]]] = {}

    def reset(self, version: int) -> None:
        self.version = version
        self.borrowers.clear()
        self.tallies.clear()
        self.shares.clear()
        self.after.clear()
        self.counted.clear()


class Outcome:
    __slots__ = ("candidates", "placement", "targets")

    def __init__(self, targets: list[Target] | None, placement: Placement | None = None,
                 candidates: int = 0) -> None:
        self.targets = targets  # None: preemption cannot make the job admissible
        self.placement = placement
        self.candidates = candidates  # how many candidates the policies allowed


class Preemptor:
    def __init__(self, cache: QuotaCache, pool: NodePool,
                 admitted: dict[str, AdmittedJobs]) -> None:
        self.cache = cache
        self.pool = pool
        self.admitted = admitted  # ClusterQueue -> admitted workloads by name
        self.fair_sharing = True
        # Jobs admitted after this admission sequence number (in the running cycle) are no
        # candidates: the control plane would start them only to stop them at once.
        self.admitted_by: int | None = None
        self._trees: dict[str, list[QuotaNode]] = {}
        # Terminating victims whose quota a waiting preemptor's hold counts on, this cycle
        # (Cycle.apply_hold): no candidates for anyone else.
        self.promised: set[str] = set()
        self._memos: dict[Tree, _TreeMemo] = {}  # by identity: names may repeat across kinds
        # minRuntime: young jobs of other queues are no candidates (counts and tallies still
        # hold them: they only bound what a search could find).
        self.protection = Protection({}, {})
        self._preempting = ""  # the queue of the job the running search is for
        self._plane: str | None = None  # with several planes: the one the search is in
        # ...and the highest priority a victim there may have to beat the best plane so far.
        self._at_most: int | None = None
        self.planes_of: dict[str, str | None] = {}  # jobs' planes, forgotten each cycle

    def _memo(self, node: QuotaNode) -> _TreeMemo:
        """What depends only on the usage of ``node``'s cohort tree, kept until it changes:
        between two charges of a tree a cycle asks the same of its queues once per pending
        head of the tree it looks at, and charges elsewhere do not matter."""
        tree = node.tree
        memo = self._memos.get(tree)
        if memo is None:
            memo = self._memos[tree] = _TreeMemo(tree.usage_version)
        elif memo.version != tree.usage_version:
            memo.reset(tree.usage_version)
        return memo

    def share(self, node: QuotaNode) -> float:
        """``dominant_share(node)``, remembered until usage changes."""
        shares = self._memo(node).shares
        found = shares.get(node.name)
        if found is None:
            found = shares[node.name] = dominant_share(node)
        return found

    def share_without(self, node: QuotaNode, key: UsageKey, usage: dict[FR, int]) -> float:
        """``dominant_share(node, minus=usage)`` (``key``: ``usage`` sorted), remembered
        until usage changes."""
        after = self._memo(node).after
        found = after.get((node.name, key))
        if found is None:
            found = after[(node.name, key)] = dominant_share(node, minus=usage)
        return found

    def _borrowing(self, node: QuotaNode, frs: list[FR]) -> list[QuotaNode]:
        """The queues of ``node``'s tree with admitted jobs that borrow some of ``frs``."""
        borrowers = self._memo(node).borrowers
        key = tuple(frs)
        found = borrowers.get(key)
        if found is None:
            admitted, is_borrowing = self.admitted, self.cache.is_borrowing
            found = borrowers[key] = [
                other for other in self._tree(node)
                if admitted.get(other.name) and is_borrowing(other, frs)
            ]
        return found

    # ------------------------------------------------------------------ candidates
    def _tree(self, node: QuotaNode) -> list[QuotaNode]:
        root = node.root()
        found = self._trees.get(root.name)
        if found is None:
            found = self._trees[root.name] = self.cache.queues_in_tree(node)
        return found

    def _sources(self, wl: Workload, cq: QueueInfo, frs: list[FR]) -> list[Source]:
        """The queues the policies let ``wl`` take from, with the bounds on their jobs."""
        out: list[Source] = []
        p = wl.priority
        if cq.within != NEVER:
            jobs = self.admitted.get(cq.name)
            if jobs:
                newer = wl if cq.within == "LowerOrNewerEqualPriority" else None
                out.append(Source(cq.name, jobs, p, newer))
        node = cq.node
        if node.parent is not None and cq.reclaim != NEVER:
            limit = None if cq.reclaim == "Any" else p
            admitted = self.admitted
            for other in self._borrowing(node, frs):
                if other is not node:
                    out.append(Source(other.name, admitted[other.name], limit, None))
        return out

    def _tally(self, sources: list[Source], frs: list[FR]) -> tuple[int, dict[FR, int]]:
        """How many candidates there are and how much of each of ``frs`` they hold."""
        count = 0
        held = [0] * len(frs)
        tallies: dict[tuple[str, int | None, tuple[FR, ...]], tuple[int, list[int]]] = {}
        if sources:  # every source is in one tree, the preemptor's
            tallies = self._memo(self.cache.cqs[sources[0].queue]).tallies
        frs_key = tuple(frs)
        for src in sources:
            key = (src.queue, src.below, frs_key)
            found = tallies.get(key)
            if found is None:
                n, amounts = 0, [0] * len(frs)
                for u in src.jobs.counts(src.below):
                    if u.uses(frs):
                        n += u.count
                        for i, fr in enumerate(frs):
                            amounts[i] += u.count * u.usage.get(fr, 0)
                found = tallies[key] = (n, amounts)
            count += found[0]
            for i, amount in enumerate(found[1]):
                held[i] += amount
            newer = src.newer_than
            if newer is not None:
                for c in src.jobs.by_priority.get(newer.priority, {}).values():
                    if c.newer_than(newer) and any(fr in c.usage for fr in frs):
                        count += 1
                        for i, fr in enumerate(frs):
                            held[i] += c.usage.get(fr, 0)
        return count, dict(zip(frs, held, strict=True))

    def _candidates(self, src: Source, frs: list[FR]) -> Iterator[Workload]:
        """One source's candidates, lazily, in candidate order."""
        jobs = src.jobs.in_order(src.below, src.newer_than, self.admitted_by)
        if self.promised:
            jobs = self._unpromised(jobs)
        jobs = self.protection.unprotected(jobs, self._preempting)
        if self._plane is not None:
            jobs = self._on_plane(jobs, self._plane, self._at_most)
        if len(frs) == 1:  # the usual case: a plain membership test
            only = frs[0]
            return (c for c in jobs if only in c.usage)
        return (c for c in jobs if any(fr in c.usage for fr in frs))

    def _on_plane(self, jobs: Iterator[Workload], plane: str,
                  at_most: int | None) -> Iterator[Workload]:
        """The jobs running on compute plane ``plane`` (of priority at most ``at_most``).
        A job that holds no node we know (its quota held while its nodes are bought, or its
        node just gone) runs on no plane, so giving it up costs no other cluster anything:
        it counts in every one."""
        plane_of = self._plane_of
        for c in jobs:
            if at_most is not None and c.priority > at_most:
                continue
            where = plane_of(c.name)
            if where is None or where == plane:
                yield c

    def _plane_of(self, job: str) -> str | None:
        """The plane of the first node ``job`` holds that we know (None for none)."""
        known = self.planes_of
        if job in known:
            return known[job]
        where = None
        nodes = self.pool.index.nodes
        for name in self.pool.holdings(job):
            node = nodes.get(name)
            if node is not None:
                where = node.labels.get(PLANE_LABEL)
                break
        known[job] = where
        return where

    def _unpromised(self, jobs: Iterator[Workload]) -> Iterator[Workload]:
        promised = self.promised
        return (c for c in jobs if not c.terminating or c.name not in promised)

    def _per_queue(self, sources: list[Source], frs: list[FR]
                   ) -> dict[str, tuple[Source, Iterator[Workload]]]:
        """Each source's candidates in candidate order, lazily: a search mostly stops after
        the first few of a queue. Sources the tally found nobody in are left out."""
        if not sources:
            return {}
        tallies = self._memo(self.cache.cqs[sources[0].queue]).tallies
        frs_key = tuple(frs)
        out: dict[str, tuple[Source, Iterator[Workload]]] = {}
        for src in sources:
            found = tallies.get((src.queue, src.below, frs_key))
            if found is None or found[0] or src.newer_than is not None:
                out[src.queue] = (src, self._candidates(src, frs))
        return out

    @staticmethod
    def _order(cands: list[Workload], cq: QueueInfo) -> None:
        cands.sort(key=lambda c: (not c.terminating, c.cluster_queue == cq.name, c.priority,
                                  *least_work_lost(c), c.name))

    def _counted(self, wl: Workload, cq: QueueInfo, frs: list[FR]
                 ) -> tuple[list[Source], int, dict[FR, int]]:
        """The sources and their tally. They depend on the job only through its queue and
        priority, and under LowerOrNewerEqualPriority on the job itself (its order among its
        peers), so heads alike share one answer until their tree's usage changes."""
        newer = (wl, wl.submitted_at, wl.seq) if cq.within == "LowerOrNewerEqualPriority" else None
        key = (cq.name, wl.priority, newer, tuple(sorted(frs)))
        counted = self._memo(cq.node).counted
        found = counted.get(key)
        if found is None:
            sources = self._sources(wl, cq, frs)
            count, held = self._tally(sources, frs)
            found = counted[key] = (sources, count, held)
        return found

    def possible(self, wl: Workload, cq: QueueInfo, short: dict[FR, int]) -> bool:
        """Whether candidates exist that hold at least ``short`` (fr -> missing amount)."""
        if not cq.can_preempt:
            return False
        _, _, held = self._counted(wl, cq, sorted(short))
        return all(held[fr] >= need for fr, need in short.items())

    def simulate(self, wl: Workload, cq: QueueInfo, fr: FR, amount: int) -> tuple[int, bool]:
        """Kueue's preemption oracle, for choosing a flavor: whether preemption could make
        room for ``amount`` of ``fr`` in ``cq`` (quota alone): NO_CANDIDATES, RECLAIM (from
        other queues alone) or PREEMPT_IN_QUEUE (jobs of ``cq`` itself); and whether ``cq``
        would borrow once the victims are gone. Victims about to go no longer count as used,
        so a flavor whose own jobs make room is not taken for one that borrows."""
        self._preempting = cq.name
        a = Assignment(PREEMPT)
        a.usage = {fr: amount}
        frs = [fr]
        node = cq.node
        fair = self.fair_sharing and node.parent is not None
        if fair and self._fair_hopeless(wl, a, cq, frs):
            return NO_CANDIDATES, False
        sources, count, held = self._counted(wl, cq, frs)
        if not count or not self._could_cover(a, node, frs, held):
            return NO_CANDIDATES, False
        search = self._search(fair, cq)(self.cache, self.pool, self.share, wl, cq, a, frs,
                                    quota_only=True)
        try:
            if fair:
                targets = search.fair(self._per_queue(sources, frs))
            else:
                removable = [c for src in sources for c in self._candidates(src, frs)]
                self._order(removable, cq)
                targets = search.classic(removable)
        finally:
            search.restore()
        if not targets:
            return NO_CANDIDATES, False
        own = [t.wl for t in targets if t.wl.cluster_queue == cq.name]
        left = node.usage.get(fr, 0) - sum(c.usage.get(fr, 0) for c in own)
        borrows = node.parent is not None and left + amount > node.nominal(fr)
        return (PREEMPT_IN_QUEUE if own else RECLAIM), borrows

    def would_have_candidates(self, wl: Workload, cq: QueueInfo, frs: list[FR]) -> str:
        """The policy that forbids preempting jobs that could otherwise make room ("" if none)."""
        if cq.within == NEVER:
            jobs = self.admitted.get(cq.name)
            if jobs and any(u.uses(frs) for u in jobs.counts(wl.priority)):
                return "withinClusterQueue=Never"
        node = cq.node
        if node.parent is not None and cq.reclaim == NEVER and any(
            other is not node and self.cache.is_borrowing(other, frs)
            for other in self._tree(node)
        ):
            return "reclaimWithinCohort=Never"
        return ""

    # ------------------------------------------------------------------ the search
    def find(self, wl: Workload, cq: QueueInfo, a: Assignment) -> Outcome:
        """The victims that let ``wl`` run with assignment ``a``, and where it would run."""
        found = self._find(wl, cq, a)
        planes = self.pool.index.plane_nodes
        if len(planes) < 2 or not found.targets or self._in_one_plane(found):
            # (the search over every plane's candidates, placing the gang in one plane, is
            # what one cluster's search would be; it is kept when its victims are there)
            return found
        best: Outcome | None = None
        candidates = 0
        for plane in sorted(planes):
            # Once a plane has victims, another can only do better with victims of no
            # higher priority: the rest are no candidates there (its search ends sooner).
            self._plane = plane
            self._at_most = None if best is None else _cost(best)[0]
            try:
                found = self._find(wl, cq, _pinned(a, plane))
            finally:
                self._plane = self._at_most = None
            candidates = max(candidates, found.candidates)
            if found.targets and (best is None or _cost(found) < _cost(best)):
                best = found
        return best if best is not None else Outcome(None, candidates=candidates)

    def _in_one_plane(self, found: Outcome) -> bool:
        """Whether ``found``'s victims all run on the plane its placement is in."""
        assert found.targets is not None and found.placement is not None
        nodes = self.pool.index.nodes
        there = {nodes[n].labels.get(PLANE_LABEL) for names in found.placement.nodes
                 for n in names if n in nodes}
        return all(self._plane_of(t.wl.name) in there or self._plane_of(t.wl.name) is None
                   for t in found.targets)

    def _find(self, wl: Workload, cq: QueueInfo, a: Assignment) -> Outcome:
        self._preempting = cq.name
        cache, node = self.cache, cq.node
        frs = [fr for fr, v in a.usage.items() if v > cache.available(node, fr)]
        nodes_only = not frs
        if nodes_only:  # quota fits: only nodes are short
            frs = sorted(a.usage)
        fair = self.fair_sharing and node.parent is not None
        hopeless = fair and self._fair_hopeless(wl, a, cq, frs)
        if hopeless and nodes_only:
            # The caller then reports why nodes are short and never reads the candidate
            # count, so even counting them is skipped.
            return Outcome(None)
        sources, count, held = self._counted(wl, cq, frs)
        if not count:
            return Outcome(None)
        if hopeless or not self._could_cover(a, node, frs, held):
            return Outcome(None, candidates=count)
        removable: list[Workload] = []
        if not fair:
            removable = [c for src in sources for c in self._candidates(src, frs)]
            self._order(removable, cq)
            if not self._could_make_room(a, node, frs, iter([removable])):
                return Outcome(None, candidates=count)
        elif not nodes_only and not self._could_make_room(
                a, node, frs, self._reclaimable(a, cq, sources, frs)):
            # Quota is short: the fair-sharing strategies often let the search take too
            # little, which this check sees from a few sizes per queue. (With only nodes
            # short, the search itself stops sooner than the check would.)
            return Outcome(None, candidates=count)
        search = self._search(fair, cq)(self.cache, self.pool, self.share, wl, cq, a, frs)
        if fair:
            search.after = self._memo(node).after  # (at the usage the search starts from)
        try:
            if fair:
                targets = search.fair(self._per_queue(sources, frs))
            else:
                targets = search.classic(removable)
            return Outcome(targets, search.placement, count)
        finally:
            search.restore()

    @staticmethod
    def _search(fair: bool, cq: QueueInfo) -> type[VictimSearch]:
        """In a cohort tree, fair sharing compares the subtrees below the common cohort."""
        return TreeFairSearch if fair and in_tree(cq.node) else VictimSearch

    def _fair_hopeless(self, wl: Workload, a: Assignment, cq: QueueInfo, frs: list[FR]) -> bool:
        """Whether fair-sharing preemption cannot pick anyone, known without the search.

        Taking a job only lowers its queue's share. The first strategy needs the preemptor's
        new share at most the candidate queue's share after the removal, the second strictly
        below its share before; so a queue whose share is below the new share, or equal to it
        with no job whose removal keeps it there, offers nobody. When no queue that could hold
        candidates (borrowing, with admitted jobs) offers anyone, with no candidate of the
        preemptor's own queue and no borrowWithinCohort, the search would come back empty
        (the common case on a busy cohort). Jobs of equal usage remove the same share, so
        each distinct usage is looked at once.
        """
        node = cq.node
        if cq.borrow_within or in_tree(node) or (
                cq.within != NEVER and self.admitted.get(cq.name)):
            return False  # (shares of queues alone do not decide in a tree)
        if cq.reclaim == NEVER:
            return True
        new_share = dominant_share(node, a.usage)
        admitted = self.admitted
        limit = None if cq.reclaim == "Any" else wl.priority
        for other in self._borrowing(node, frs):
            if other is node:
                continue
            share = self.share(other)
            if new_share < share:
                return False
            if new_share > share:
                continue
            for u in admitted[other.name].counts(limit):
                if u.uses(frs) and new_share <= self.share_without(other, u.key, u.usage):
                    return False
        return True

    def _reclaimable(self, a: Assignment, cq: QueueInfo, sources: list[Source],
                     frs: list[FR]) -> Iterator[list[Workload]]:
        """The candidates the fair-sharing search could take at most, replayed without nodes.

        Each queue's share depends only on its own usage, so what the search takes from a
        queue does not depend on the others: in candidate order, a job is taken when the
        queue's share after its removal stays at least the preemptor's new share, until the
        queue stops borrowing; then at most the first job it skipped, if the queue's share
        is still above the new share. With candidates of the preemptor's own queue or
        borrowWithinCohort the replay does not apply, and every candidate is returned.
        One list per source queue, lazily: the caller stops once it has seen enough.
        """
        own = [src for src in sources if src.queue == cq.name]
        if cq.borrow_within or in_tree(cq.node) or any(
                next(self._candidates(src, frs), None) for src in own):
            for src in sources:
                yield list(self._candidates(src, frs))
            return
        new_share = dominant_share(cq.node, a.usage)
        cqs = self.cache.cqs
        for src in sources:
            out: list[Workload] = []
            other = cqs[src.queue]
            if len(frs) == 1:
                only = frs[0]
                sizes: set[int] = set()
                single, every = True, True  # each usage is one resource; each is ``only``
                for u in src.jobs.counts(src.below):
                    if len(u.usage) != 1:
                        single = False
                        break
                    amount = u.usage.get(only)
                    if amount is None:
                        every = False
                    else:
                        sizes.add(amount)
                if sizes and single:
                    yield self._reclaimable_of(src, other, only, new_share, min(sizes), every)
                    continue
            # Walked lazily: a queue usually stops borrowing after its first few jobs.
            queue = self._candidates(src, frs)
            gone: dict[FR, int] = {}
            skipped: Workload | None = None
            # Until something is taken, jobs of equal usage get the same verdict.
            refused: set[UsageKey] = set()
            limits = removal_limits(other, new_share)
            for c in queue:
                if c.usage_key in refused:
                    continue
                if limits is not None:
                    keeps = keeps_share(limits, gone, c.usage)
                else:
                    keeps = new_share <= dominant_share(other, minus={
                        fr: gone.get(fr, 0) + c.usage.get(fr, 0) for fr in gone.keys() | c.usage})
                if keeps:
                    out.append(c)
                    for fr, amount in c.usage.items():
                        gone[fr] = gone.get(fr, 0) + amount
                    refused.clear()
                    if not any(other.usage.get(fr, 0) - gone.get(fr, 0) > other.subtree.get(fr, 0)
                               for fr in frs):
                        break
                else:
                    refused.add(c.usage_key)
                    if skipped is None:
                        skipped = c
            if skipped is not None and new_share < dominant_share(other, minus=gone):
                out.append(skipped)
            yield out

    def _reclaimable_of(self, src: Source, other: QuotaNode, fr: FR, new_share: float,
                        smallest: int, every: bool) -> list[Workload]:
        """``_reclaimable`` for one queue whose candidates hold nothing but ``fr``: how much
        may go is worked out once, and the walk ends as soon as nothing more could.
        ``every``: all the queue's jobs under the bound hold ``fr``, so none is filtered."""
        most = max_removal(other, fr, new_share)
        limit = (1 << 62) if most is None else most
        borrowed = other.usage.get(fr, 0) - other.subtree.get(fr, 0)
        out: list[Workload] = []
        gone = 0
        skipped: Workload | None = None
        # (Equal-priority newer jobs are not among the counted ones: those are filtered.)
        jobs = self.protection.unprotected(
            self._unpromised(src.jobs.in_order(src.below, None, self.admitted_by)),
            self._preempting) if every and src.newer_than is None \
            else self._candidates(src, [fr])
        if self._plane is not None and every and src.newer_than is None:
            jobs = self._on_plane(jobs, self._plane, self._at_most)
        for c in jobs:
            amount = c.usage[fr]
            if gone + amount <= limit:
                out.append(c)
                gone += amount
                if gone >= borrowed:
                    break  # the queue no longer borrows
            else:
                if skipped is None:
                    skipped = c
                if limit - gone < smallest:
                    break  # nothing left in this queue is small enough
        if skipped is not None:
            # Its share stays above the new share: what the second strategy may still take.
            above = max_removal(other, fr, new_share, strict=True)
            if above is None or gone <= above:
                out.append(skipped)
        return out

    def _could_make_room(self, a: Assignment, node: QuotaNode, frs: list[FR],
                         batches: Iterator[list[Workload]]) -> bool:
        """Whether taking every candidate the search could take (``batches``, a superset)
        would leave room for the job: someone to take, the quota shortfall held by them,
        and the pods fitting on nodes with their capacity freed. If not, no subset makes
        room and the search would come back empty. The answer is yes as soon as it is
        known, without the rest of the batches."""
        cache = self.cache
        need: dict[FR, int] = {}
        for fr in frs:
            missing = a.usage.get(fr, 0) - max(0, cache.available(node, fr))
            if missing > 0:
                need[fr] = missing
        room = FreedRoom(self.pool, a.groups)
        for batch in batches:
            if not batch:
                continue
            for c in batch:
                for fr in need:
                    need[fr] -= c.usage.get(fr, 0)
            if not room.enough():  # (once it is, the nodes the rest hold do not matter)
                room.add(c.name for c in batch)
            if room.enough() and all(n <= 0 for n in need.values()):
                return True
        return False

    def _could_cover(self, a: Assignment, node: QuotaNode, frs: list[FR],
                     held: dict[FR, int]) -> bool:
        """A cheap necessary condition: the candidates hold at least the shortfall."""
        for fr in frs:
            short = a.usage.get(fr, 0) - max(0, self.cache.available(node, fr))
            if short > 0 and held.get(fr, 0) < short:
                return False
        return True


def _pinned(a: Assignment, plane: str) -> Assignment:
    """``a`` with every pod held to nodes of compute plane ``plane``."""
    pinned = Assignment(a.mode)
    pinned.choices = a.choices
    pinned.usage = a.usage
    pinned.borrowing = a.borrowing
    pinned.shortfalls = a.shortfalls
    pinned.no_flavor = a.no_flavor
    pinned.groups = tuple(
        PodGroup(g.name, g.count, g.min_count, g.requests,
                 (*g.node_selector, (PLANE_LABEL, plane)), g.tolerations)
        for g in a.groups)
    return pinned


def _cost(found: Outcome) -> tuple[int, int]:
    """What a plane's victims cost: the highest priority among them, then how many."""
    assert found.targets
    return max(t.wl.priority for t in found.targets), len(found.targets)
