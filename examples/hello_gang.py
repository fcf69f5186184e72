"""Each pod prints its rank environment, then all pods meet at a TCP barrier.

Rank 0 listens on MASTER_ADDR:MASTER_PORT; every other rank connects and
waits until rank 0 has heard from the whole world, which only happens when the
gang was started all at once.
"""

import os
import socket
import time

rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
print(
    f"rank {rank}/{world} job={os.environ['PHALANX_JOB']} pod_set={os.environ['PHALANX_POD_SET']} "
    f"master={addr}:{port} node_rank={os.environ['NODE_RANK']}",
    flush=True,
)

if rank == 0:
    server = socket.create_server((addr, port))
    peers = [server.accept()[0] for _ in range(world - 1)]
    for peer in peers:
        peer.recv(16)
    for peer in peers:
        peer.sendall(b"go")
        peer.close()
    print(f"rank 0: barrier passed with {world} ranks", flush=True)
else:
    deadline = time.time() + 60
    while True:
        try:
            conn = socket.create_connection((addr, port), timeout=5)
            break
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.1)
    conn.sendall(f"{rank}".encode())
    assert conn.recv(16) == b"go"
    print(f"rank {rank}: barrier passed", flush=True)
