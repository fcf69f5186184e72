"""A job's credential acts for one attempt: refused once that attempt ends, however it
ends; the next attempt gets its own; asking again for the same attempt gives the same key.

The control loop, the simulated plane and the authenticator as ``phalanx up`` wires them,
stepped by hand (the HTTP and real-pod sides: ``tests/e2e/test_job_credentials.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from phalanx.compute.base import PodCredential
from phalanx.compute.simulated import SimulatedPlane
from phalanx.control import Controller
from phalanx.errors import AuthError, Forbidden
from phalanx.server.auth import Authenticator
from phalanx.server.ui.session import Sessions
from phalanx.spec import JobSpec, Node
from phalanx.spec.status import JobRecord, JobStatus
from phalanx.store import AuditEntry, IdentityStore, Store, Team, User

NODES = [Node(name=f"n{i}", allocatable={"cpu": 4, "memory": 2 ** 34}) for i in range(2)]


def _job(name: str) -> JobSpec:
    return JobSpec.model_validate({
        "name": name, "restart": {"backoff": 0},
        "podSets": [{"resources": {"cpu": "4"}, "command": ["x"]}],
    })


def test_a_credential_acts_for_its_attempt_only(tmp_path: Path) -> None:
    plane = SimulatedPlane(NODES, logs_root=tmp_path / "logs")
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    auth = Authenticator(tmp_path, IdentityStore(store))
    given: list[tuple[int, str]] = []

    def credentials(record: JobRecord, attempt: int) -> PodCredential:
        given.append((attempt, auth.job_keys.key_for(record, attempt)))
        return PodCredential("http://127.0.0.1:7780", given[-1][1])

    controller = Controller(store, plane, credentials=credentials)
    auth.attempts = controller.service.running_attempt
    controller.submit(_job("long"))
    (admission,) = controller.step().admissions
    controller.step()
    assert controller.get("long").status is JobStatus.RUNNING
    [(attempt, first)] = given
    assert attempt == 1
    token = auth.exchange(first, "pod").token
    assert auth.verify(token).job is not None

    # Its node is lost: attempt 1 ends and the job is queued again at once.
    plane.remove_node(admission.pod_sets[0].nodes[0])
    controller.step()
    with pytest.raises(AuthError, match="attempt 1 has ended"):
        auth.verify(token)
    with pytest.raises(AuthError):
        auth.exchange(first, "pod")
    controller.step()  # attempt 2 on the node that is left: a credential of its own
    assert controller.get("long").attempt == 2
    assert [a for a, _ in given] == [1, 2] and given[1][1] != first
    second = given[1][1]
    assert auth.verify(auth.exchange(second, "pod").token).job is not None
    record = controller.get("long")
    assert auth.job_keys.key_for(record, 2) == second  # the same key every time it is asked
    with pytest.raises(AuthError):
        auth.exchange(first, "old pod")  # the earlier attempt's stays refused

    # Cancelled: refused at once, while its pods are still being stopped.
    token = auth.exchange(second, "pod").token
    controller.cancel("long")
    with pytest.raises(AuthError, match="attempt 2 has ended"):
        auth.verify(token)
    store.close()


def test_a_credential_for_another_job_of_the_same_name_is_refused(tmp_path: Path) -> None:
    """A key is bound to its job's owner and submit time, not to the name alone."""
    plane = SimulatedPlane(NODES, logs_root=tmp_path / "logs")
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    auth = Authenticator(tmp_path, IdentityStore(store))
    controller = Controller(store, plane)
    auth.attempts = controller.service.running_attempt
    controller.submit(_job("named"))
    controller.step()
    controller.step()
    record = controller.get("named")
    # Submitted under a name no user has (as earlier versions recorded the local admin's
    # jobs): its credential acts as the bootstrap key's user, admin, never as that name.
    assert record.user == "unknown"
    assert auth.exchange(auth.job_keys.key_for(record, 1), "pod").principal.name == "admin"
    earlier = record.model_copy(update={"submitted_at": record.submitted_at - 60})
    with pytest.raises(AuthError):
        auth.exchange(auth.job_keys.key_for(earlier, 1), "pod")
    store.close()


@pytest.mark.parametrize(("role", "writes"), [("viewer", False), ("member", True),
                                              ("admin", True)])
def test_a_credential_has_its_owners_role_but_never_admin_powers(
        tmp_path: Path, role: str, writes: bool) -> None:
    plane = SimulatedPlane(NODES, logs_root=tmp_path / "logs")
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    identity = IdentityStore(store)
    auth = Authenticator(tmp_path, identity)
    identity.put_team(Team("t", ("default",)), AuditEntry("admin", "-", "team-set", "t"))
    identity.put_user(User("owner", role, ("t",)), None)
    controller = Controller(store, plane)
    auth.attempts = controller.service.running_attempt
    controller.service.submit(_job("owned"), user="owner")
    controller.step()
    controller.step()
    key = auth.job_keys.key_for(controller.get("owned"), 1)
    principal = auth.verify(auth.exchange(key, "pod").token)
    assert (principal.name, principal.role, principal.writes) == ("owner", role, writes)
    assert principal.queues == frozenset({"default"}) and not principal.acts_as_admin
    with pytest.raises(Forbidden, match="jobs and queues only"):
        principal.check_admin()
    with pytest.raises(Forbidden, match="jobs and queues only"):
        principal.check_person()
    # Nor does it open a dashboard session, whose cookie would outlive the attempt.
    assert Sessions(auth.bootstrap_key, authenticator=auth).sign_in(key, "pod") is None
    if not writes:  # a viewer's job's credential reads only
        with pytest.raises(Forbidden, match="viewer"):
            principal.check_submit("default")
    else:
        principal.check_submit("default")
    identity.set_disabled("owner", True, AuditEntry("admin", "-", "user-disable", "owner"))
    auth.user_changed("owner", disabled=True)
    with pytest.raises(AuthError, match="disabled"):  # its owner's standing, at once
        auth.exchange(key, "pod")
    store.close()
