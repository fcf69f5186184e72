"""A CLI call imports only what its verb needs: `phalanx version`, `jobs` and `describe`
against a real control plane load no store, server, compute plane, job kinds, scheduler
or SQLAlchemy, nor the spec's models their answers do not need (`version` none at all, nor
pydantic), and `phalanx --help` lists every verb without importing any verb's module."""

from __future__ import annotations

import inspect
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from phalanx.cli.main import UNUSED_IMPORTS, VERBS, load_verb
from tests.sdk.live_server import LiveServer

NODES = """\
nodes:
  - name: sim-a
    allocatable: {cpu: 4, memory: 8Gi}
"""

# What a client verb must never load: the control plane's own machinery.
SERVER_SIDE = ("sqlalchemy", "phalanx.store", "phalanx.server", "phalanx.compute",
               "phalanx.kinds", "phalanx.scheduler", "fastapi", "uvicorn")
# Models of the spec a job's answer does not need: the queue configuration, Kueue's objects,
# the manifests' translations and the API's other answers (each tens of milliseconds).
UNUSED_MODELS = ("phalanx.spec.config", "phalanx.spec.kueue", "phalanx.spec.manifests",
                 "phalanx.spec.api", "phalanx.sdk.documents")


def imported_modules(stderr: str) -> set[str]:
    """The modules a ``python -X importtime`` run imported, from its stderr."""
    names = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            name = line.rsplit("|", 1)[1].strip()
            if name != "package":  # the header line
                names.add(name)
    return names


def under(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    """The modules that are one of ``packages`` or inside one."""
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in packages))


def server_side(modules: set[str]) -> list[str]:
    return under(modules, SERVER_SIDE)


def run_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "phalanx.cli.main", *args],
        env={**env, "COLUMNS": "200"}, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with LiveServer.simulated(tmp_path_factory.mktemp("phalanx-cli-start"), NODES) as live:
        job = live.home.parent / "job.yaml"
        job.write_text("name: quick\npodSets:\n- name: w\n  replicas: 1\n"
                       "  resources: {cpu: 100m}\n  command: [sleep, '0']\n")
        done = subprocess.run([sys.executable, "-m", "phalanx.cli.main", "submit", "-f",
                               str(job)], env=live.env, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        yield live


@pytest.mark.parametrize("verb", [["version"], ["jobs"], ["describe", "quick"],
                                  ["describe", "quick", "--json"]])
def test_client_verbs_load_nothing_of_the_server(server: LiveServer, verb: list[str]) -> None:
    done = run_cli(server.env, *verb)
    assert done.returncode == 0, done.stderr[-2000:]
    modules = imported_modules(done.stderr)
    assert "phalanx.sdk.client" in modules  # the run did talk to the server
    assert server_side(modules) == [], f"`phalanx {' '.join(verb)}` imported these"
    # httpx's own command line (click, pygments) and trio stay out of the `phalanx` process.
    assert sorted(m for m in modules if m.split(".")[0] in ("click", "pygments", "attr")) == []
    assert "quick" in done.stdout or verb == ["version"]
    # Nor the spec's models a job's answer does not need (a job's record needs JobSpec's).
    assert under(modules, UNUSED_MODELS) == [], f"`phalanx {' '.join(verb)}` imported these"


def test_version_names_the_server_without_loading_the_core(server: LiveServer) -> None:
    done = run_cli(server.env, "version")
    assert done.returncode == 0, done.stderr[-2000:]
    # The version is read without the spec's models: none of them is loaded (spec.names
    # holds plain strings).
    modules = imported_modules(done.stderr)
    spec = set(under(modules, ("phalanx.spec",)))
    assert spec <= {"phalanx.spec", "phalanx.spec.names"}, sorted(spec)
    # Nor pydantic at all: typer's options are read without its validators (cli/params.py).
    assert under(modules, ("pydantic", "pydantic_core")) == []
    assert f"at {server.url}" in done.stdout
    assert "scheduler core: " in done.stdout


# What each everyday verb leaves unloaded beyond the server's side: `version` prints two
# plain lines (no rich, no model), `jobs` and `describe` draw from rows read from the
# API's JSON (spec/rows.py, spec/detailrows.py: no pydantic, no model of a job), and none
# reads YAML (a job submitted as a manifest is the one whose page shows YAML).
NOT_LOADED = {
    "version": ("rich", "pydantic", "pydantic_core", "yaml", "phalanx.spec.rows",
                "phalanx.spec.detailrows", "phalanx.cli.render"),
    "jobs": ("pydantic", "pydantic_core", "yaml", "phalanx.spec.status",
             "phalanx.spec.resources", "phalanx.spec.detailrows"),
    "describe": ("pydantic", "pydantic_core", "yaml", "phalanx.spec.status",
                 "phalanx.spec.resources", "phalanx.spec.sources"),
}


@pytest.mark.parametrize("verb", [["version"], ["jobs"], ["describe", "quick"]])
def test_each_verb_loads_only_what_it_shows(server: LiveServer, verb: list[str]) -> None:
    done = run_cli(server.env, *verb)
    assert done.returncode == 0, done.stderr[-2000:]
    modules = imported_modules(done.stderr)
    assert "phalanx.sdk.client" in modules
    assert under(modules, NOT_LOADED[verb[0]]) == [], f"`phalanx {' '.join(verb)}` loaded these"


def test_describe_without_models_shows_what_the_models_show(server: LiveServer) -> None:
    # The page drawn from rows is the page drawn from the job's record, for a live job's
    # answer, and it is what `phalanx describe` printed.
    import io

    from rich.console import Console

    from phalanx.cli import render
    from phalanx.spec.detailrows import DetailRow
    from phalanx.spec.status import JobDetail

    done = run_cli(server.env, "describe", "quick")
    assert done.returncode == 0, done.stderr[-2000:]
    with server.client() as client:
        answer = client.get("/v1/jobs/quick").json()

    def page(job: JobDetail | DetailRow) -> str:
        buffer = io.StringIO()
        Console(file=buffer, width=200, color_system=None).print(
            render.describe_job(job, answer["submittedAt"] + 30))
        return buffer.getvalue()

    assert page(DetailRow.of(answer)) == page(JobDetail.model_validate(answer))
    shown = " ".join(done.stdout.split())
    assert "Queue default (ClusterQueue default)" in shown
    assert "cpu=100m" in shown and "sleep 0" in shown and "Events" in shown


def test_the_jobs_table_builds_no_model_of_a_job(server: LiveServer) -> None:
    # The table is drawn from rows read from the JSON (spec/rows.py): no pydantic at all.
    done = run_cli(server.env, "jobs")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "quick" in done.stdout
    modules = imported_modules(done.stderr)
    assert under(modules, ("pydantic", "pydantic_core", "phalanx.spec.status")) == []


def test_help_lists_every_verb_and_imports_none(tmp_path: Path) -> None:
    done = run_cli({"PHALANX_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}, "--help")
    assert done.returncode == 0, done.stderr[-2000:]
    listed = {line.split()[1] for line in done.stdout.splitlines()
              if line.startswith("│ ") and len(line.split()) > 2}
    assert set(VERBS) <= listed
    modules = imported_modules(done.stderr)
    loaded = sorted({f"phalanx.cli.{target.split(':')[0]}" for target, _ in VERBS.values()}
                    & modules)
    assert loaded == []
    assert server_side(modules) == []
    assert "phalanx.sdk.client" not in modules


def test_a_wrong_verb_is_refused_with_the_close_names(tmp_path: Path) -> None:
    done = run_cli({"PHALANX_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}, "jbos")
    assert done.returncode == 2
    assert "Did you mean 'jobs'?" in done.stderr


@pytest.mark.parametrize("name", list(VERBS))
def test_the_table_says_what_the_verb_says(name: str) -> None:
    # `--help` shows the table's line; `phalanx VERB --help` the command's own docstring.
    command = load_verb(name)
    own = inspect.cleandoc(command.help or "").split("\n\n")[0]
    assert " ".join(own.split()) == VERBS[name][1]
    assert command.name == name


def test_importing_the_cli_blocks_no_import_of_its_host() -> None:
    # Only the `phalanx` program blocks UNUSED_IMPORTS; a process that imports the app (as
    # this one does, and CliRunner tests) may still import them.
    import httpx

    assert [sys.modules.get(name, "not loaded") for name in UNUSED_IMPORTS].count(None) == 0
    assert callable(httpx.main)
