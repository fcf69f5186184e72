"""Which user the local plane's pods run as: ``phalanx up --run-as-user NAME|UID``.

The local plane's counterpart of a Kubernetes pod's ``securityContext.runAsUser``.
A pod running as the control plane's own user can read everything the control
plane can: the API token, the store, every job's logs, and the control plane's
own environment under ``/proc``. Owner-only modes on the state directory keep out
only pods that run as someone else, so:

- a control plane running as root runs pods as the user it is told,
  ``--run-as-user nobody`` (or a dedicated unprivileged user); told nothing, it
  runs them as root and warns (``--run-as-user root`` says so on purpose);
- a control plane running as an ordinary user runs pods as that user (it cannot
  switch users); ``--run-as-user`` may only name that same user then.

A name is looked up in the user database (its primary group and supplementary
groups come with it). A number is taken as a uid even without an entry there, as
Kubernetes does; its group is then the number itself, never root's group.
"""

from __future__ import annotations

import logging
import os
import pwd
from dataclasses import dataclass
from typing import Any

from phalanx.errors import SpecError

log = logging.getLogger("phalanx.compute.local")

FIELD = "--run-as-user"
ROOT_UID = 0


@dataclass(frozen=True, slots=True)
class PodUser:
    """The identity a pod's command gets (the supervisor drops to it before exec)."""

    uid: int
    gid: int
    groups: tuple[int, ...]
    name: str | None  # None: a uid with no entry in the user database
    home: str  # the pod's HOME: the database's entry, else "/" as on Kubernetes

    def to_json(self) -> dict[str, Any]:
        """What the supervisor needs (``shim.py`` reads exactly these keys)."""
        return {"uid": self.uid, "gid": self.gid, "groups": list(self.groups)}

    def environment(self) -> dict[str, str]:
        """HOME, USER and LOGNAME of this user, so tools do not look in root's home."""
        env = {"HOME": self.home}
        if self.name is not None:
            env["USER"] = env["LOGNAME"] = self.name
        return env


def resolve_pod_user(value: str) -> PodUser:
    """The user ``value`` names (a user name or a numeric uid), or a SpecError saying why not."""
    text = value.strip()
    if not text:
        raise SpecError("is empty", field=FIELD,
                        fix="give a user name or a numeric uid, e.g. --run-as-user nobody")
    if text.isdigit():
        uid = int(text)
        try:
            entry = pwd.getpwuid(uid)
        except KeyError:
            return PodUser(uid=uid, gid=uid, groups=(), name=None, home="/")
    else:
        try:
            entry = pwd.getpwnam(text)
        except KeyError:
            raise SpecError(
                f"no user named {text!r} on this machine", field=FIELD,
                fix="create the user, or give an existing one (e.g. nobody) or a numeric uid",
            ) from None
    groups = tuple(sorted(set(os.getgrouplist(entry.pw_name, entry.pw_gid))))
    return PodUser(uid=entry.pw_uid, gid=entry.pw_gid, groups=groups, name=entry.pw_name,
                   home=entry.pw_dir or "/")


def pod_user_for(run_as_user: str | None, *, control_plane_uid: int | None = None) -> (
    PodUser | None
):
    """Whom pods run as under ``--run-as-user`` (None: the control plane's own user).

    A root control plane given no user runs its pods as root, with a warning: refusing
    would break the one-command start on a machine where everything runs as root (a
    container, a fresh VM), and such a machine has no other user to protect. Operators
    who share the machine pass ``--run-as-user``. Raises a SpecError naming
    ``--run-as-user`` when a non-root control plane is asked for another user.
    """
    own = os.geteuid() if control_plane_uid is None else control_plane_uid
    if run_as_user is None:
        if own == ROOT_UID:
            log.warning(
                "the control plane runs as root and so do its pods, which can read its API "
                "token, store and every job's logs; pass --run-as-user nobody (or a dedicated "
                "unprivileged user) to keep them out, or --run-as-user root to silence this")
        return None
    user = resolve_pod_user(run_as_user)
    if user.uid == own:
        return None  # nothing to switch
    if own != ROOT_UID:
        raise SpecError(
            f"the control plane runs as uid {own}, which cannot start processes as "
            f"uid {user.uid}", field=FIELD,
            fix="start the control plane as root to run pods as another user, or leave "
            "--run-as-user out to run them as the control plane's own user",
        )
    return user
