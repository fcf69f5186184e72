"""Ray clusters from Python, in the CodeFlare SDK's shape.

```python
from phalanx.ray import Cluster, ClusterConfiguration

cluster = Cluster(ClusterConfiguration(name="raytest", num_workers=2, worker_cpu=1,
                                       worker_memory=2))
cluster.up()
cluster.wait_ready()
print(cluster.dashboard_uri())
cluster.job_client.submit_job(entrypoint="python my_script.py")   # Ray's own client
cluster.down()
```

A light client: it loads Ray only for ``job_client`` (``pip install 'phalanx[ray]'``).
"""

from phalanx.ray.cluster import (
    Cluster,
    ClusterStatus,
    RayCluster,
    get_cluster,
    list_clusters,
)
from phalanx.ray.config import ClusterConfiguration

list_all_clusters = list_clusters  # CodeFlare's name

__all__ = [
    "Cluster",
    "ClusterConfiguration",
    "ClusterStatus",
    "RayCluster",
    "get_cluster",
    "list_all_clusters",
    "list_clusters",
]
