"""The ``phalanx`` command line: start the control plane, submit and watch jobs, set queues.

Exit codes scripts can rely on: 0 success, 1 a failed or cancelled job or an
unreachable/broken server, 2 bad input (nothing was sent or changed).

A call answers at once because it imports only its own verb's module: ``VERBS`` below
names, for every verb, where it lives and the line ``phalanx --help`` shows for it, so
listing the verbs imports none of them. To add a verb, write it in a module of this
package (a typer command function, or a ``typer.Typer`` of sub-verbs) and add one line
to ``VERBS``: ``"name": ("module:attribute", "its first help line"),``. The line must
match the command's own help (a test checks), and the module should import at its top
only what its verbs need.
"""

from __future__ import annotations

import sys
from difflib import get_close_matches
from importlib import import_module
from pathlib import Path
from typing import Annotated, Any

import typer
from typer._click import Command, Context, HelpFormatter
from typer._click.exceptions import UsageError
from typer.core import MarkupMode, TyperCommand, TyperGroup
from typer.main import get_command_from_info, get_group_from_info
from typer.models import CommandInfo, TyperInfo

from phalanx.cli import params
from phalanx.cli.settings import Settings

# Every verb: its module under phalanx.cli and the attribute there (a command function, or
# a typer.Typer of sub-verbs), and the help `phalanx --help` lists, in this order.
VERBS: dict[str, tuple[str, str]] = {
    "up": ("serve:up",
           "Start the embedded control plane (foreground, or in the background with -d)."),
    "down": ("serve:down", "Stop the control plane running on this state directory."),
    "submit": ("jobs:submit",
               "Submit jobs (several documents: all or none); prints each name on its own "
               "line."),
    "run": ("run:run",
            "Run COMMAND as a job, in a copy of the current directory (like sbatch --wrap)."),
    "wait": ("jobs:wait_for",
             "Wait until the jobs end; exit 0 only if all succeeded (as `submit --wait`)."),
    "jobs": ("jobs:jobs",
             "List jobs, newest first: the newest 50 unless --limit or --all says otherwise."),
    "describe": ("jobs:describe",
                 "A job's spec, status, placement, pods, events and why it is pending."),
    "logs": ("jobs:logs",
             "Print a job's logs (all pods, each line prefixed by its pod, or one pod)."),
    "cancel": ("jobs:cancel",
               "Cancel a job, or every live job a queue, labels or a user select: pods get "
               "SIGTERM, then SIGKILL after a grace period."),
    "delete": ("jobs:delete",
               "Delete a finished job, or queue configuration (all or nothing; refused while "
               "in use)."),
    "status": ("admin:status",
               "Whether the control plane runs, where, how many jobs it holds, and each "
               "compute plane: its state, nodes, running jobs and the CPUs and GPUs they use."),
    "version": ("versions:version",
                "The client's version, and the server's when it is reachable."),
    "apply": ("admin:apply",
              "Create or update flavors, cohorts, queues and priority classes (all or "
              "nothing); Kueue's own objects (kueue.x-k8s.io) are read too."),
    "config": ("admin:config", "Print the current queue configuration as YAML documents."),
    "get": ("configio:get", "One configuration object, as `phalanx apply -f` takes it back."),
    "export": ("configio:export",
               "The whole configuration, as `phalanx apply -f` takes it back (with --as kueue, "
               "kinds Kueue lacks, such as ProvisioningPolicy, stay in Phalanx's form in the "
               "same file)."),
    "queues": ("admin:queues",
               "ClusterQueues with quota and usage per flavor and resource, and LocalQueues."),
    "nodes": ("admin:nodes", "Nodes with allocatable and used resources, labels and health."),
    "pools": ("admin:pools",
              "Node pools bought for pending gangs (with --job: every attempt, and why each "
              "failed)."),
    "node": ("admin:node",
             "A node's health, cordon and the last answer of each of its health checks."),
    "cordon": ("admin:cordon", "Place no new pods on a node; what runs there keeps running."),
    "uncordon": ("admin:uncordon", "Let the scheduler place pods on a cordoned node again."),
    "drain": ("admin:drain",
              "Cordon a node and stop the gangs on it; they requeue onto other nodes (system "
              "failures)."),
    "sim": ("sim:sim",
            "Replay a job trace through the scheduler in virtual time and report what "
            "happened."),
    "login": ("login:login",
              "Store an API key for a control plane (read from a prompt or stdin) and use it "
              "from now on."),
    "logout": ("login:logout",
               "Forget the stored key of a control plane (the current one by default)."),
    "whoami": ("login:whoami",
               "Who the control plane takes you for: user, role, teams and their queues."),
    "audit": ("identity:audit",
              "The audit log, oldest first: who changed what, when, from where (admins only)."),
    "ui": ("ui:ui", "Open the web dashboard (sign in with the API key it names)."),
    "doctor": ("doctor:doctor",
               "Check this node's health: GPUs (NVML), disk, memory and the site's own "
               "checks."),
    "exec": ("podexec:exec_command",
             "Run a command inside a running pod of a job, e.g. `phalanx exec JOB -it -- "
             "bash`."),
    "attach": ("podexec:attach",
               "Follow a running pod's output (its log) until the job ends."),
    "worker": ("worker:worker",
               "Run a compute plane for a remote control plane: it dials out, nothing dials "
               "in."),
    "users": ("identity:users", "Users: their role and teams (admins only)."),
    "keys": ("identity:keys", "API keys: create (shown once), list, revoke."),
    "teams": ("identity:teams", "Teams and the LocalQueues their members may submit to."),
    "backup": ("backup:backup",
               "Back up the store (one consistent snapshot) and the state directory's keys, "
               "encrypted."),
    "restore": ("backup:restore",
                "Restore a backup onto a new, empty store and state directory (refused "
                "otherwise)."),
    "k8s": ("k8s:app", "Render the Kubernetes manifests of a Phalanx deployment."),
    "cluster": ("cluster:app", "Ray clusters: up, list, status, dashboard, down."),
    "secrets": ("secrets:app",
                "Secrets: stored encrypted, per team or your own, used by jobs as env, files or "
                "registry credentials; never shown back."),
    "plane": ("planes:app",
              "Compute planes that dial in: add, list, describe, cordon, drain, remove."),
    "workdirs": ("workdirs:app",
                 "Uploaded working directories (workdir): prune those no job needs."),
}


def load_verb(name: str, rich_markup_mode: MarkupMode = "rich") -> Command:
    """The click command of a verb of ``VERBS``, importing its module now."""
    module, attribute = VERBS[name][0].split(":")
    target = getattr(import_module(f"phalanx.cli.{module}"), attribute)
    if isinstance(target, typer.Typer):
        return get_group_from_info(
            TyperInfo(target, name=name), pretty_exceptions_short=app.pretty_exceptions_short,
            suggest_commands=True, rich_markup_mode=rich_markup_mode)
    # A verb's own context settings (``run`` leaves what follows its command alone).
    settings = getattr(target, "context_settings", None)
    return get_command_from_info(CommandInfo(name=name, callback=target,
                                             context_settings=settings),
                                 pretty_exceptions_short=app.pretty_exceptions_short,
                                 rich_markup_mode=rich_markup_mode)


params.install()  # options read without building a pydantic validator for each


class LazyVerbs(TyperGroup):
    """The top-level group: a verb's module is imported when that verb runs; help lists
    every verb from ``VERBS`` alone."""

    _listing = False

    def list_commands(self, ctx: Context) -> list[str]:
        return [*self.commands, *(name for name in VERBS if name not in self.commands)]

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        if cmd_name not in VERBS:
            return None
        if self._listing:  # a stand-in that only names the verb and its help
            return TyperCommand(name=cmd_name, help=VERBS[cmd_name][1])
        command = load_verb(cmd_name, self.rich_markup_mode)
        self.commands[cmd_name] = command
        return command

    def format_help(self, ctx: Context, formatter: HelpFormatter) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False

    def resolve_command(
        self, ctx: Context, args: list[str]
    ) -> tuple[str | None, Command | None, list[str]]:
        # TyperGroup suggests close names from the commands already loaded; these are all.
        suggest, self.suggest_commands = self.suggest_commands, False
        try:
            return super().resolve_command(ctx, args)
        except UsageError as exc:
            matches = get_close_matches(args[0], self.list_commands(ctx)) if args else []
            if suggest and matches:
                names = ", ".join(repr(m) for m in matches)
                exc.message = f"{exc.message.rstrip('.')}. Did you mean {names}?"
            raise
        finally:
            self.suggest_commands = suggest


app = typer.Typer(
    name="phalanx",
    cls=LazyVerbs,
    help="Queue, gang-schedule and run distributed training jobs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def main(
    ctx: typer.Context,
    url: Annotated[
        str | None,
        typer.Option(help="Control plane URL (default: $PHALANX_URL, else server.json)"),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(help="API key (default: $PHALANX_TOKEN, else the file "
                     "$PHALANX_API_KEY_FILE (in a job's pod), else the key of `phalanx login`, "
                     "else $PHALANX_HOME/token)"),
    ] = None,
    home: Annotated[
        Path | None,
        typer.Option(help="State directory (default: $PHALANX_HOME, else ~/.phalanx)"),
    ] = None,
    act_as: Annotated[
        str | None,
        typer.Option("--as", metavar="USER",
                     help="Act as this user (admins only; every request is audited with "
                          "both names)"),
    ] = None,
) -> None:
    ctx.obj = Settings(url=url, token=token, home=home, act_as=act_as)


# Libraries that other libraries import when they find them installed, which no verb
# uses: blocked from loading in the `phalanx` process, they cost nothing. `import httpx`
# imports httpx's own command line (click, pygments, rich.syntax: about a third of
# httpx's import time) whenever click is installed, and uvicorn installs it; httpcore
# imports trio when it is installed (selenium brings it), and the CLI's HTTP is
# synchronous and the server's asyncio.
UNUSED_IMPORTS = ("httpx._main", "trio")


def run() -> None:
    """The `phalanx` program (the entry point): ``app`` with the unused imports blocked.
    Importing this module blocks nothing: a process that imports ``app`` keeps its own."""
    blocked: dict[str, Any] = sys.modules  # typeshed's values are modules; None blocks one
    for name in UNUSED_IMPORTS:
        blocked.setdefault(name, None)  # `import name` now raises ImportError
    app()


if __name__ == "__main__":
    run()
