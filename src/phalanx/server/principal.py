"""Who asks the API: a user with a role, teams and the LocalQueues those teams may use.

A principal comes from a verified token (``server/auth.py``) and decides what its
requests may see and do: ``sees`` (a job in full, not only as queue occupancy), ``owns``
(the job's secrets too), ``may_submit_to``.

A principal whose token came from a job's credential (``job`` is set, see
``server/jobkeys.py``) is that job's owner with the owner's role and teams for jobs and
queues, and nothing an admin may do by being admin: a pod runs a script, whatever its
owner may do, and a script (or a package it imports) is not trusted with the cluster's
configuration, other people's keys or their pods.
"""

from __future__ import annotations

from dataclasses import dataclass

from phalanx.errors import Forbidden
from phalanx.spec.status import JobRecord

ADMIN_ROLE = "admin"
MEMBER_ROLE = "member"
VIEWER_ROLE = "viewer"
READ_SCOPE = "read"
BOOTSTRAP_KEY = "bootstrap"  # the id of the state directory's admin key


@dataclass(frozen=True, slots=True)
class JobBinding:
    """The attempt of a job a credential was issued to: it acts only while that attempt runs."""

    job: str
    attempt: int
    submitted_at: float  # tells a job from a later one of the same name


@dataclass(frozen=True, slots=True)
class Principal:
    name: str
    role: str
    teams: tuple[str, ...] = ()
    queues: frozenset[str] = frozenset()  # the LocalQueues of its teams
    scope: str = "all"  # all | read (the key's scope)
    key: str = ""  # the id of the API key the token came from
    expires_at: float = 0.0
    job: JobBinding | None = None  # set when the token came from a job's credential
    acted_by: str | None = None  # the admin acting as this user (``X-Phalanx-Act-As``)

    @property
    def is_admin(self) -> bool:
        return self.role == ADMIN_ROLE

    @property
    def acts_as_admin(self) -> bool:
        """Whether it may do what only admins may (configuration, nodes, anyone's keys and
        pods): an admin, unless the token is a job's (see the module's docstring)."""
        return self.is_admin and self.job is None

    @property
    def writes(self) -> bool:
        """Whether it may change anything at all (a viewer or a read-only key may not)."""
        return self.role != VIEWER_ROLE and self.scope != READ_SCOPE

    def sees(self, record: JobRecord) -> bool:
        """Whether the job is shown in full: admins see all, others their teams' and own."""
        return self.is_admin or record.queue in self.queues or record.user == self.name

    def owns(self, record: JobRecord) -> bool:
        """Whether this viewer may see the job's secrets: its submitter only."""
        return record.user == self.name

    def check_writes(self) -> None:
        if self.scope == READ_SCOPE:
            raise Forbidden(f"{self.name}'s token comes from a read-only key",
                            field="Authorization",
                            fix="log in with a key of scope 'all' to change anything")
        if self.role == VIEWER_ROLE:
            raise Forbidden(f"this needs role member or admin; {self.name} is a viewer",
                            field="role", fix="ask an admin to make you a member of a team")

    def check_person(self) -> None:
        """Forbidden for a job's credential: what it may not do even as an admin's."""
        if self.job is not None:
            raise Forbidden(
                f"this token is job {self.job.job}'s (attempt {self.job.attempt}), which acts "
                f"as {self.name} on jobs and queues only: never on configuration, nodes, "
                "API keys or the dashboard", field="Authorization",
                fix="do it from outside the pod, with your own key (`phalanx login`)")

    def check_admin(self) -> None:
        self.check_person()
        if not self.is_admin:
            raise Forbidden(f"this needs role admin; {self.name} is a {self.role}",
                            field="role", fix="ask an admin to do it, or to make you an admin")

    def check_submit(self, queue: str) -> None:
        self.check_writes()
        if self.is_admin or queue in self.queues:
            return
        teams = ", ".join(self.teams) or "none"
        raise Forbidden(
            f"submitting to LocalQueue {queue} needs a team that may use it; {self.name}'s "
            f"teams ({teams}) may use {', '.join(sorted(self.queues)) or 'no queue'}",
            field="queue", fix=f"submit to one of your teams' queues, or ask an admin to add "
                               f"{queue} to your team (`phalanx teams set TEAM --queue {queue}`)")


