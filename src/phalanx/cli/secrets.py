"""``phalanx secrets``: create, list and delete secrets (values never shown back)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from phalanx.cli.output import note, out, print_json, reports_errors
from phalanx.cli.render import ago
from phalanx.cli.settings import settings_of
from phalanx.errors import SpecError

app = typer.Typer(help="Secrets: stored encrypted, per team or your own, used by jobs as "
                       "env, files or registry credentials; never shown back.",
                  no_args_is_help=True)
JSON = Annotated[bool, typer.Option("--json", help="Print JSON")]


class SecretType(StrEnum):
    ENV = "env"
    FILE = "file"
    SSH = "ssh"
    DOCKER = "docker"


def _pairs(items: list[str], option: str) -> list[tuple[str, str]]:
    pairs = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SpecError(f"{item[:40].split('=')[0]!r}... is not KEY=VALUE", field=option,
                            fix=f"write {option} KEY=VALUE")
        pairs.append((key, value))
    return pairs


@app.command("create")
@reports_errors
def create(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The secret's name")],
    literal: Annotated[list[str] | None, typer.Option(
        "--from-literal", help="KEY=VALUE (repeatable); prefer --from-file: a shell's "
        "history keeps a literal")] = None,
    from_file: Annotated[list[str] | None, typer.Option(
        "--from-file", help="KEY=PATH: the file's content (repeatable)")] = None,
    kind: Annotated[SecretType, typer.Option(
        "--type", help="env (variables), file, ssh (ssh-privatekey) or docker "
        "(.dockerconfigjson)")] = SecretType.ENV,
    team: Annotated[str | None, typer.Option(
        "--team", "-t", help="The owning team (default: the secret is yours alone)")] = None,
    as_json: JSON = False,
) -> None:
    """Store a secret, encrypted; its values are never shown back."""
    data: dict[str, str | bytes] = dict(_pairs(literal or [], "--from-literal"))
    for key, path in _pairs(from_file or [], "--from-file"):
        try:
            data[key] = Path(path).expanduser().read_bytes()
        except OSError as exc:
            raise SpecError(f"cannot read {path}: {exc.strerror}", field="--from-file",
                            fix="name a file you can read") from None
    if not data:
        raise SpecError("no values given", field="--from-literal",
                        fix="pass --from-literal KEY=VALUE or --from-file KEY=PATH")
    with settings_of(ctx).client() as client:
        secret = client.create_secret(name, data, type=kind.value, team=team)
    if as_json:
        print_json(secret.to_dict())
    else:
        owner = f"team {secret.team}" if secret.team else f"user {secret.user}"
        note(f"secret {secret.name} ({secret.type}, keys {', '.join(secret.keys)}) of {owner}")


@app.command("list")
@reports_errors
def list_secrets(ctx: typer.Context, as_json: JSON = False) -> None:
    """Your own and your teams' secrets: names, types and keys, never values."""
    with settings_of(ctx).client() as client:
        items = client.secrets()
    if as_json:
        print_json([s.to_dict() for s in items])
        return
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("NAME", "TYPE", "KEYS", "TEAM", "CREATED"):
        table.add_column(column)
    for s in items:
        table.add_row(s.name, s.type, ", ".join(s.keys), s.team or f"(user {s.user})",
                      ago(s.created_at))
    out().print(table)


@app.command("delete")
@reports_errors
def delete(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The secret's name")],
    team: Annotated[str | None, typer.Option("--team", "-t", help="The owning team")] = None,
) -> None:
    """Delete a secret; running attempts keep what they were given."""
    with settings_of(ctx).client() as client:
        secret = client.delete_secret(name, team=team)
    note(f"secret {secret.name} deleted")
