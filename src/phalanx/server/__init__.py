"""The control plane: HTTP API, store and the scheduling loop."""

from phalanx.control import Controller
from phalanx.server.app import create_app
from phalanx.server.main import DEFAULT_PORT, default_home, make_plane, serve

__all__ = ["DEFAULT_PORT", "Controller", "create_app", "default_home", "make_plane", "serve"]
