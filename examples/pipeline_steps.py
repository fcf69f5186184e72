"""The steps of examples/pipeline.yaml: prepare data, train a model, evaluate it.

Each step is a separate job; they hand their results on through files in one
shared directory, ``$PIPELINE_DIR`` (``pipeline-data`` under the working
directory unless set). Plain Python, so it runs anywhere Phalanx does.
"""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path

DATA = Path(os.environ.get("PIPELINE_DIR", "pipeline-data"))
SLOPE, INTERCEPT = 3.0, 2.0


def prepare() -> None:
    """Noisy points on the line y = 3x + 2, written as CSV."""
    DATA.mkdir(parents=True, exist_ok=True)
    rng = random.Random(7)
    rows = [(x, SLOPE * x + INTERCEPT + rng.gauss(0, 0.1))
            for x in (rng.uniform(-5, 5) for _ in range(500))]
    (DATA / "data.csv").write_text("".join(f"{x},{y}\n" for x, y in rows))
    print(f"prepared {len(rows)} points in {DATA / 'data.csv'}")


def _points() -> list[tuple[float, float]]:
    lines = (DATA / "data.csv").read_text().split()
    return [(float(x), float(y)) for x, y in (line.split(",") for line in lines)]


def train() -> None:
    """Least squares for slope and intercept, written as JSON."""
    points = _points()
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    slope = (sum((x - mx) * (y - my) for x, y in points)
             / sum((x - mx) ** 2 for x, _ in points))
    model = {"slope": slope, "intercept": my - slope * mx}
    (DATA / "model.json").write_text(json.dumps(model))
    print(f"trained on {n} points: slope {model['slope']:.3f} "
          f"intercept {model['intercept']:.3f}")


def evaluate() -> None:
    """Mean squared error of the model on the data; fails above 0.05."""
    model = json.loads((DATA / "model.json").read_text())
    points = _points()
    mse = sum((model["slope"] * x + model["intercept"] - y) ** 2
              for x, y in points) / len(points)
    print(f"evaluated: mse {mse:.4f}")
    if mse > 0.05:
        sys.exit(f"mse {mse:.4f} is above 0.05")


def report() -> None:
    """Whatever the steps before left behind."""
    for path in sorted(DATA.glob("*")):
        print(f"{path.name}: {path.stat().st_size} bytes")


if __name__ == "__main__":
    {"prepare": prepare, "train": train, "evaluate": evaluate, "report": report}[sys.argv[1]]()
