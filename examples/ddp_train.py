"""A small PyTorch DDP training run over gloo, on data it makes itself.

Each rank fits a two-layer network to a noisy linear target; gradients are
averaged across ranks by DistributedDataParallel. The loss printed by rank 0
falls as training goes on.
"""

import os
import warnings

# The CPU wheel warns at import when NumPy is absent; this example never needs it.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

EPOCHS = int(os.environ.get("EPOCHS", "20"))


def main() -> None:
    dist.init_process_group("gloo")  # reads MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    true_w = torch.randn(16, 1)
    generator = torch.Generator().manual_seed(1 + rank)  # each rank its own shard
    x = torch.randn(2048, 16, generator=generator)
    y = x @ true_w + 0.05 * torch.randn(2048, 1, generator=generator)

    model = DistributedDataParallel(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1)))
    optimiser = torch.optim.SGD(model.parameters(), lr=0.05)
    loss_fn = nn.MSELoss()
    first = last = 0.0
    for epoch in range(EPOCHS):
        for batch in range(0, len(x), 128):
            optimiser.zero_grad()
            loss = loss_fn(model(x[batch : batch + 128]), y[batch : batch + 128])
            loss.backward()
            optimiser.step()
        total = torch.tensor([loss.item()])
        dist.all_reduce(total)
        last = total.item() / world
        first = first or last
        if rank == 0:
            print(f"epoch {epoch:3d} loss {last:.4f}", flush=True)
    if rank == 0:
        print(f"done: {world} ranks, loss {first:.4f} -> {last:.4f}", flush=True)
    dist.destroy_process_group()
    if last >= first:
        raise SystemExit("loss did not fall")


if __name__ == "__main__":
    main()
