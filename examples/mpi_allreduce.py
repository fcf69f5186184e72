"""Every MPI rank contributes rank + 1; an allreduce sums them on every rank.

With N ranks each prints the same sum, N * (N + 1) / 2, and where it ran (the
worker pod whose orted started it).
"""

import os

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
total = comm.allreduce(rank + 1, op=MPI.SUM)
pod = os.environ.get("PHALANX_POD_NAME", MPI.Get_processor_name())
print(f"rank {rank} of {size} in {pod}: allreduce sum = {total} "
      f"(expected {size * (size + 1) // 2})", flush=True)
