"""Flavor assignment, as Kueue's pkg/scheduler/flavorassigner.

``flavors`` picks the ResourceFlavor of each pod set (then whether its pods fit on
nodes); ``partial`` shrinks a job with minReplicas to the size that fits or that
preemption can make room for (Kueue's PodSetReducer).
"""
