"""A small PyTorch DDP training run over gloo, on data it makes itself.

Each rank fits a two-layer network to a noisy linear target; gradients are
averaged across ranks by DistributedDataParallel. The loss printed by rank 0
falls as training goes on.

It keeps its work across preemptions: after every epoch rank 0 saves the model,
the optimiser and the epoch into ``PHALANX_CHECKPOINT_DIR`` (which Phalanx keeps for
the job across its attempts), and a new attempt resumes from there, saying so in its
log. On SIGTERM (a preemption or a drain) the ranks finish the epoch under way, save
it and stop, so the job's termination grace should cover one epoch.
"""

import gc
import os
import signal
import time
import warnings
from pathlib import Path
from types import FrameType

# The CPU wheel warns at import when NumPy is absent; this example never needs it.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

EPOCHS = int(os.environ.get("EPOCHS", "20"))
EPOCH_PAUSE = float(os.environ.get("EPOCH_PAUSE", "0"))  # seconds: stretch a short run
CHECKPOINT = "checkpoint.pt"

stop_requested = False


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    global stop_requested
    stop_requested = True


def _checkpoint_path() -> Path | None:
    where = os.environ.get("PHALANX_CHECKPOINT_DIR")
    return Path(where) / CHECKPOINT if where else None


def _save(path: Path, state: dict[str, object]) -> None:
    """Write then rename: a kill mid-write never leaves a torn checkpoint."""
    partial = path.with_suffix(".partial")
    torch.save(state, partial)
    os.replace(partial, path)


def main() -> None:
    signal.signal(signal.SIGTERM, _on_sigterm)
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
    start = 0
    path = _checkpoint_path()
    if path is not None and path.exists():
        saved = torch.load(path, weights_only=True)
        model.module.load_state_dict(saved["model"])
        optimiser.load_state_dict(saved["optimiser"])
        start, first = int(saved["epoch"]) + 1, float(saved["first_loss"])
        last = float(saved["last_loss"])
        if rank == 0:
            print(f"resuming from epoch {start} (checkpoint of epoch {start - 1})", flush=True)
    for epoch in range(start, EPOCHS):
        for batch in range(0, len(x), 128):
            optimiser.zero_grad()
            loss = loss_fn(model(x[batch : batch + 128]), y[batch : batch + 128])
            loss.backward()
            optimiser.step()
        time.sleep(EPOCH_PAUSE)
        total = torch.tensor([loss.item(), float(stop_requested)])
        dist.all_reduce(total)  # the loss, and whether any rank was asked to stop
        last = total[0].item() / world
        first = first or last
        if rank == 0:
            print(f"epoch {epoch:3d} loss {last:.4f}", flush=True)
            if path is not None:
                _save(path, {"model": model.module.state_dict(),
                             "optimiser": optimiser.state_dict(),
                             "epoch": epoch, "first_loss": first, "last_loss": last})
        dist.barrier()  # nobody stops before the checkpoint is written
        if total[1].item() > 0:
            if rank == 0:
                print(f"stopping after epoch {epoch} (SIGTERM); checkpoint saved", flush=True)
            del model  # DDP holds the process group (see _leave_process_group)
            _leave_process_group()
            return
    if rank == 0:
        print(f"done: {world} ranks, loss {first:.4f} -> {last:.4f}", flush=True)
    del model
    _leave_process_group()
    if last >= first:
        raise SystemExit("loss did not fall")


def _leave_process_group() -> None:
    """Leave the process group together, once nothing else holds it (the caller drops its
    DDP model first): a group still referenced after destroy_process_group() is torn down
    at interpreter exit, where gloo's threads can abort the process ("terminate called
    without an active exception") after the work is done."""
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
