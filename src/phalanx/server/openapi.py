"""The API's OpenAPI document, without a running control plane.

``python -m phalanx.server.openapi --write tests/server/openapi_v1.json`` rewrites the
committed snapshot that ``tests/server/test_openapi.py`` compares the live document with;
run it only when the API is meant to change.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from phalanx.control import Controller
from phalanx.control.planes import PlaneRegistry
from phalanx.server.app import create_app
from phalanx.server.auth import Authenticator
from phalanx.store import LogStore
from phalanx.store.workdirs import WORKDIRS, WorkdirStore

SNAPSHOT = Path("tests/server/openapi_v1.json")


def document() -> dict[str, Any]:
    """The document ``GET /openapi.json`` serves, with the version left out.

    Routes use the controller's service and the log store only when called, so the document
    needs neither, nor an authenticator (the app only looks the service, the identity store
    and the pepper up as it is built); the version is left out
    so that a release, which changes no model, changes no snapshot.
    """
    no_controller = cast(Controller, SimpleNamespace(service=None))
    no_auth = cast(Authenticator, SimpleNamespace(identity=None,
                                                  hasher=SimpleNamespace(pepper=b"")))
    no_planes = cast(PlaneRegistry, SimpleNamespace(timers=None))
    app = create_app(no_controller, no_auth, cast(LogStore, None), db_label="", dashboard=False,
                     planes=no_planes, workdirs=WorkdirStore(Path(WORKDIRS)))
    return without_version(app.openapi())


def without_version(doc: dict[str, Any]) -> dict[str, Any]:
    return {**doc, "info": {k: v for k, v in doc.get("info", {}).items() if k != "version"}}


def render(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--write", type=Path, nargs="?", const=SNAPSHOT, default=None,
                        metavar="PATH", help=f"write the document to PATH (default {SNAPSHOT})")
    args = parser.parse_args(argv)
    text = render(document())
    if args.write is None:
        print(text, end="")
    else:
        args.write.write_text(text)
        print(f"wrote {args.write}")


if __name__ == "__main__":
    main()
