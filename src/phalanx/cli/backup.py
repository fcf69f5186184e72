"""``phalanx backup FILE`` and ``phalanx restore FILE``: the store and the state directory's
keys, in one encrypted file (store/backup.py), and back onto a new store.

Both work on the store and the state directory directly, not through a control plane: a
backup may be taken while one runs (the snapshot is one read transaction); a restore needs
a new, empty store and is refused on any other.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Annotated

import typer

from phalanx.cli.output import note, reports_errors
from phalanx.cli.settings import settings_of
from phalanx.defaults import replace_private
from phalanx.errors import SpecError
from phalanx.store.backup import (
    PASSPHRASE_ENV,
    PASSPHRASE_FIX,
    restore_snapshot,
    seal,
    take_snapshot,
    unseal,
)
from phalanx.store.engine import default_url

PassphraseFile = Annotated[
    Path | None,
    typer.Option("--passphrase-file", dir_okay=False,
                 help=f"File whose first line is the passphrase (default: ${PASSPHRASE_ENV})"),
]
Db = Annotated[
    str | None,
    typer.Option(help="Store URL, e.g. postgresql://... (default: the state directory's "
                 "SQLite file)"),
]


def _passphrase(path: Path | None) -> bytes:
    if path is not None:
        try:
            lines = path.read_text().splitlines()
        except OSError as exc:
            raise SpecError(f"cannot read {path}: {exc.strerror}", field="--passphrase-file",
                            fix="give a readable file holding the passphrase") from None
        value = lines[0] if lines else ""
    else:
        value = os.environ.get(PASSPHRASE_ENV, "")
    if not value:
        raise SpecError("no passphrase was given" if path is None else f"{path} is empty",
                        field="--passphrase-file", fix=PASSPHRASE_FIX)
    return value.encode()


@reports_errors
def backup(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="Where to write the backup", dir_okay=False)],
    passphrase_file: PassphraseFile = None,
    db: Db = None,
) -> None:
    """Back up the store (one consistent snapshot) and the state directory's keys, encrypted."""
    passphrase = _passphrase(passphrase_file)
    home = settings_of(ctx).state_dir
    started = time.monotonic()
    snapshot = take_snapshot(db or default_url(home), home)
    data = seal(snapshot, passphrase)
    replace_private(file, data, file.with_name(f".{file.name}.partial"))
    note(f"backed up {snapshot.count('jobs')} jobs, {snapshot.count('secrets')} secrets and "
         f"{len(snapshot.files)} key files to {file} ({len(data)} bytes, "
         f"{time.monotonic() - started:.1f}s)")


@reports_errors
def restore(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="A file written by `phalanx backup`",
                                         exists=True, dir_okay=False)],
    passphrase_file: PassphraseFile = None,
    db: Db = None,
) -> None:
    """Restore a backup onto a new, empty store and state directory (refused otherwise)."""
    passphrase = _passphrase(passphrase_file)
    home = settings_of(ctx).state_dir
    started = time.monotonic()
    snapshot = unseal(file.read_bytes(), passphrase)
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    restore_snapshot(snapshot, db or default_url(home), home)
    note(f"restored {snapshot.count('jobs')} jobs and {snapshot.count('secrets')} secrets "
         f"into {home} ({time.monotonic() - started:.1f}s); start it with `phalanx up`")
