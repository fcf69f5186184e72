"""``phalanx users``, ``keys``, ``teams`` and ``audit``: who may do what, and what was done."""

from __future__ import annotations

import time
from enum import StrEnum
from typing import Annotated

import typer
from rich.table import Table

from phalanx.cli.output import note, out, print_json, reports_errors
from phalanx.cli.render import ago
from phalanx.cli.settings import settings_of
from phalanx.spec import parse_duration
from phalanx.spec.auth import KeyView, UserView

users = typer.Typer(help="Users: their role and teams (admins only).", no_args_is_help=True)
keys = typer.Typer(help="API keys: create (shown once), list, revoke.", no_args_is_help=True)
teams = typer.Typer(help="Teams and the LocalQueues their members may submit to.",
                    no_args_is_help=True)
JSON = Annotated[bool, typer.Option("--json", help="Print JSON")]


class Role(StrEnum):
    ADMIN = "admin"
    MEMBER = "member"
    VIEWER = "viewer"


class Scope(StrEnum):
    ALL = "all"
    READ = "read"


def _table(*columns: str) -> Table:
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in columns:
        table.add_column(column)
    return table


# --------------------------------------------------------------------------- users
Teams = Annotated[list[str] | None, typer.Option("--team", "-t", help="A team (repeatable)")]


def _user_saved(user: UserView, as_json: bool) -> None:
    if as_json:
        print_json(user.to_dict())
    else:
        note(f"user {user.name}: {user.role}, teams {', '.join(user.teams) or '-'}")


@users.command("create")
@reports_errors
def create_user(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="User name")],
    role: Annotated[Role, typer.Option(help="admin, member or viewer")] = Role.MEMBER,
    team: Teams = None,
    as_json: JSON = False,
) -> None:
    """Create a user (a name that is taken is refused: `users set` changes a user)."""
    with settings_of(ctx).client() as client:
        _user_saved(client.create_user(name, role.value, team or []), as_json)


@users.command("set")
@reports_errors
def set_user(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="User name")],
    role: Annotated[Role, typer.Option(help="admin, member or viewer")] = Role.MEMBER,
    team: Teams = None,
    as_json: JSON = False,
) -> None:
    """Set a user's role and teams (all of them), creating the user if need be."""
    with settings_of(ctx).client() as client:
        _user_saved(client.put_user(name, role.value, team or []), as_json)


@users.command("list")
@reports_errors
def list_users(ctx: typer.Context, as_json: JSON = False) -> None:
    with settings_of(ctx).client() as client:
        items = client.users()
    if as_json:
        print_json([u.to_dict() for u in items])
        return
    table = _table("NAME", "ROLE", "TEAMS", "DISABLED", "CREATED")
    for u in items:
        table.add_row(u.name, u.role, ", ".join(u.teams) or "-", "yes" if u.disabled else "",
                      ago(u.created_at))
    out().print(table)


@users.command("disable")
@reports_errors
def disable_user(ctx: typer.Context, name: Annotated[str, typer.Argument()]) -> None:
    """Refuse a user's keys and tokens at once (its jobs stay); never the last admin."""
    with settings_of(ctx).client() as client:
        client.set_user_disabled(name, True)
    note(f"user {name} disabled")


@users.command("enable")
@reports_errors
def enable_user(ctx: typer.Context, name: Annotated[str, typer.Argument()]) -> None:
    """Let a disabled user's keys exchange again."""
    with settings_of(ctx).client() as client:
        client.set_user_disabled(name, False)
    note(f"user {name} enabled")


# --------------------------------------------------------------------------- keys
def _moment(when: float) -> str:
    """A local time to the minute; a time past what the clock can show (a key stored with
    a lifetime of centuries), as such."""
    try:
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(when))
    except (OverflowError, OSError, ValueError):
        return "beyond 9999"


def _key_row(table: Table, key: KeyView) -> None:
    now = time.time()
    state = ("revoked" if key.revoked_at else
             "expired" if key.expires_at and key.expires_at <= now else "active")
    expires = "never" if key.expires_at is None else _moment(key.expires_at)
    table.add_row(key.id, key.user, key.scope, state, expires, ago(key.created_at),
                  key.description)


@keys.command("create")
@reports_errors
def create_key(
    ctx: typer.Context,
    user: Annotated[str | None, typer.Option(help="Whose key (admins; default: yours)")] = None,
    scope: Annotated[Scope, typer.Option(help="all, or read for a read-only key")] = Scope.ALL,
    expires: Annotated[str | None, typer.Option(help="Expire after this long, e.g. 90d")
                       ] = None,
    description: Annotated[str, typer.Option(help="What the key is for")] = "",
    as_json: JSON = False,
) -> None:
    """Create an API key; the key is printed once, on stdout."""
    seconds = parse_duration(expires, field="--expires") if expires else None
    with settings_of(ctx).client() as client:
        created = client.create_key(user, scope=scope.value, expires_in=seconds,
                                    description=description)
    if as_json:
        print_json(created.to_dict())
        return
    out().print(created.key, markup=False, soft_wrap=True)
    note(f"key {created.id} for {created.user} (scope {created.scope}); it is shown only now: "
         "store it (`phalanx login` reads it from stdin)")


@keys.command("list")
@reports_errors
def list_keys(
    ctx: typer.Context,
    user: Annotated[str | None, typer.Option(help="Whose keys (admins; default: all)")] = None,
    show_all: Annotated[bool, typer.Option("--all", help="Revoked keys too")] = False,
    as_json: JSON = False,
) -> None:
    """API keys by their id (never the keys themselves); revoked ones with --all."""
    with settings_of(ctx).client() as client:
        items = client.keys(user, revoked=show_all)
    if as_json:
        print_json([k.to_dict() for k in items])
        return
    table = _table("ID", "USER", "SCOPE", "STATE", "EXPIRES", "CREATED", "DESCRIPTION")
    for key in items:
        _key_row(table, key)
    out().print(table)


@keys.command("revoke")
@reports_errors
def revoke_key(ctx: typer.Context, key_id: Annotated[str, typer.Argument(help="Key id")]) -> None:
    """Revoke a key at once: no more tokens for it, and its tokens are refused."""
    with settings_of(ctx).client() as client:
        client.revoke_key(key_id)
    note(f"key {key_id} revoked")


@keys.command("rotate-signing")
@reports_errors
def rotate_signing(ctx: typer.Context) -> None:
    """Sign tokens with a new key from now on (admins); tokens already issued stay valid
    until they expire."""
    with settings_of(ctx).client() as client:
        kid = client.rotate_signing_key()
    note(f"tokens are signed with key {kid} from now on")


# --------------------------------------------------------------------------- teams
@teams.command("set")
@reports_errors
def set_team(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Team name")],
    queue: Annotated[list[str], typer.Option("--queue", "-q", help="A LocalQueue its members "
                                             "may submit to (repeatable)")],
) -> None:
    """Create a team, or set the LocalQueues its members may submit to."""
    with settings_of(ctx).client() as client:
        team = client.put_team(name, queue)
    note(f"team {team.name}: queues {', '.join(team.queues)}")


teams.command("create")(set_team)


@teams.command("list")
@reports_errors
def list_teams(ctx: typer.Context, as_json: JSON = False) -> None:
    with settings_of(ctx).client() as client:
        items = client.teams()
    if as_json:
        print_json([t.to_dict() for t in items])
        return
    table = _table("TEAM", "QUEUES")
    for team in items:
        table.add_row(team.name, ", ".join(team.queues))
    out().print(table)


@teams.command("delete")
@reports_errors
def delete_team(ctx: typer.Context, name: Annotated[str, typer.Argument()]) -> None:
    """Delete a team no user is in."""
    with settings_of(ctx).client() as client:
        client.delete_team(name)
    note(f"team {name} deleted")


# --------------------------------------------------------------------------- audit
@reports_errors
def audit(
    ctx: typer.Context,
    since: Annotated[str | None, typer.Option(help="Only this recent, e.g. 1h, 7d")] = None,
    user: Annotated[str | None, typer.Option(help="Only this user's changes")] = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many (the newest)")] = 1000,
    as_json: JSON = False,
) -> None:
    """The audit log, oldest first: who changed what, when, from where (admins only)."""
    start = time.time() - parse_duration(since, field="--since") if since else None
    with settings_of(ctx).client() as client:
        entries = client.audit(since=start, user=user, limit=limit)
    if as_json:
        print_json([e.to_dict() for e in entries])
        return
    table = _table("TIME", "USER", "CLIENT", "ACTION", "TARGET")
    for e in entries:
        table.add_row(time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(e.time)), e.user,
                      e.client, e.action, e.target)
    out().print(table)


def register(app: typer.Typer) -> None:
    app.add_typer(users, name="users")
    app.add_typer(keys, name="keys")
    app.add_typer(teams, name="teams")
    app.command("audit")(audit)
