"""`python -m phalanx.cli` runs the `phalanx` command."""

from phalanx.cli.main import run

run()
