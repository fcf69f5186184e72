"""Teams, users, API keys and the audit log in the store, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from phalanx.errors import Conflict, NotFound, SpecError
from phalanx.store import AuditEntry, IdentityStore, Store, StoredKey, Team, User
from phalanx.store.tables import api_keys, audit_log
from tests.store.factories import make_event, make_record


def entry(action: str, target: str, user: str = "admin") -> AuditEntry:
    return AuditEntry(user, "10.0.0.7", action, target, {"why": "test"})


def test_users_need_existing_teams_and_a_known_role(store: Store) -> None:
    identity = IdentityStore(store)
    with pytest.raises(SpecError) as caught:
        identity.put_user(User("ann", "member", ("nlp",)), entry("user-create", "ann"))
    assert caught.value.field == "teams" and "teams create nlp" in (caught.value.fix or "")
    with pytest.raises(SpecError) as caught:
        identity.put_user(User("ann", "owner"), entry("user-create", "ann"))
    assert caught.value.field == "role"
    assert identity.list_users() == [] and identity.audit() == []  # nothing half-applied
    assert identity.put_team(Team("nlp", ("q1",)), entry("team-set", "nlp"))
    assert identity.put_user(User("ann", "member", ("nlp",)), entry("user-create", "ann"))
    assert not identity.put_user(User("ann", "viewer", ("nlp",)), entry("user-create", "ann"))
    assert identity.get_user("ann").role == "viewer"
    with pytest.raises(Conflict, match="ann"):
        identity.delete_team("nlp", entry("team-delete", "nlp"))
    assert [t.name for t in identity.list_teams()] == ["nlp"]


def test_keys_are_stored_as_given_hashes_and_revoked_once(store: Store) -> None:
    identity = IdentityStore(store)
    identity.put_user(User("ann", "member"), None)
    identity.create_key(StoredKey("0123456789ab", "ann", "f" * 64, "read", "ci", 1.0, 10.0),
                        entry("key-create", "0123456789ab"))
    with store.engine.connect() as connection:
        row = connection.execute(select(api_keys)).one()
    assert row.hash == "f" * 64 and row.scope == "read"  # no column for the key itself
    key = identity.get_key("0123456789ab")
    assert key is not None and key.usable(5.0) and not key.usable(10.0)
    with pytest.raises(NotFound):
        identity.revoke_key("0123456789ab", entry("key-revoke", "x"), user="bob")
    revoked = identity.revoke_key("0123456789ab", entry("key-revoke", "0123456789ab"))
    identity.revoke_key("0123456789ab", entry("key-revoke", "0123456789ab"))  # no-op
    assert revoked.revoked_at is None  # the key as it was
    assert [k.id for k in identity.revoked_since(0.0)] == ["0123456789ab"]
    actions = [e.action for e in identity.audit()]
    assert actions == ["key-create", "key-revoke"]
    with pytest.raises(NotFound):
        identity.create_key(StoredKey("ba9876543210", "nobody", "0" * 64),
                            entry("key-create", "ba9876543210"))


def test_a_submit_and_its_audit_entry_are_one_transaction(store: Store) -> None:
    identity = IdentityStore(store)
    store.create_job(make_record("one"), make_event("one", 1.0),
                     audit=[entry("submit", "one", "ann")])
    with pytest.raises(Conflict):  # the name is taken: neither job nor entry is stored
        store.create_jobs([make_record("one")], audit=[entry("submit", "one", "bob")])
    with store.engine.connect() as connection:
        rows = connection.execute(select(audit_log.c.user_name, audit_log.c.target)).all()
    assert [tuple(r) for r in rows] == [("ann", "one")]
    found = identity.audit(user="ann")
    assert found[0].client == "10.0.0.7" and found[0].detail == {"why": "test"}
    assert identity.audit(since=found[0].time + 1) == []


def test_a_user_is_not_created_under_a_name_jobs_already_carry(store: Store) -> None:
    """Jobs an earlier version recorded under the OS user (the local admin's) are no new
    user's: creating a user of that name is refused, and nothing is half-applied."""
    identity = IdentityStore(store)
    store.create_job(make_record("legacy", user="root"), make_event("legacy", 1.0))
    for create_only in (True, False):
        with pytest.raises(Conflict, match="before a user of that name existed") as caught:
            identity.put_user(User("root", "member"), entry("user-create", "root"),
                              create_only=create_only)
        assert caught.value.field == "name" and "phalanx jobs --user root" in (
            caught.value.fix or "")
    assert identity.list_users() == [] and identity.audit() == []
    assert identity.put_user(User("admin", "admin"), None, adopt_jobs=True)


def test_the_last_enabled_admin_is_neither_disabled_nor_demoted(store: Store) -> None:
    identity = IdentityStore(store)
    identity.put_user(User("root-admin", "admin"), None)
    with pytest.raises(Conflict, match="last enabled admin"):
        identity.set_disabled("root-admin", True, entry("user-disable", "root-admin"))
    with pytest.raises(Conflict, match="last enabled admin"):
        identity.put_user(User("root-admin", "member"), entry("user-set", "root-admin"))
    with pytest.raises(Conflict, match="already exists"):
        identity.put_user(User("root-admin", "admin"), None, create_only=True)
    identity.put_user(User("second", "admin"), None)
    identity.set_disabled("root-admin", True, entry("user-disable", "root-admin"))
    with pytest.raises(Conflict, match="second is the last enabled admin"):
        identity.put_user(User("second", "viewer"), entry("user-set", "second"))
    assert [(u.name, u.role, u.disabled) for u in identity.list_users()] == [
        ("root-admin", "admin", True), ("second", "admin", False)]
