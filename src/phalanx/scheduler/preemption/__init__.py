"""Preemption: which admitted jobs make room for a pending one, as Kueue's pkg/scheduler/preemption.

``preemptor`` finds the candidates and rules out hopeless searches; ``search`` and
``search_tree`` run one search (classic, fair sharing, cohort trees); ``hierarchy`` says
where a preemptor has the advantage in a cohort tree; ``freed`` is the room on nodes once
victims are gone; ``protection`` keeps young jobs from being victims; ``waiting`` holds a
preemptor's capacity while its victims terminate; ``dominance`` skips pending jobs that
a smaller failed one shows cannot fit (or preempt) this cycle.
"""
