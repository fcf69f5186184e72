"""A Ray job that spreads tasks over every node of its cluster and prints where each ran.

Run it as the entrypoint of examples/ray-job.yaml, or submit it to a cluster that is up:
``ray job submit --address "$(phalanx cluster dashboard NAME)" -- python ray_spread.py``.
"""

import collections
import socket
import time

import ray

TASKS = 8

ray.init()
nodes = {n["NodeID"]: n["NodeName"] for n in ray.nodes() if n["Alive"]}
print(f"cluster of {len(nodes)} nodes: {', '.join(sorted(nodes.values()))}", flush=True)


@ray.remote(num_cpus=1)
def where(task: int) -> tuple[int, str, str]:
    time.sleep(1)  # long enough that the tasks run side by side, one per free CPU
    return task, nodes[ray.get_runtime_context().get_node_id()], socket.gethostname()


placed = ray.get([where.options(scheduling_strategy="SPREAD").remote(i) for i in range(TASKS)])
for task, node, host in placed:
    print(f"task {task} ran on node {node} (host {host})")
counts = collections.Counter(node for _, node, _ in placed)
print("tasks per node: " + ", ".join(f"{n}={c}" for n, c in sorted(counts.items())))
