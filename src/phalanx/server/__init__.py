"""The control plane: HTTP API, store and the scheduling loop."""

from phalanx.control import Controller
from phalanx.server.app import create_app
from phalanx.server.main import make_plane, serve

__all__ = ["Controller", "create_app", "make_plane", "serve"]
