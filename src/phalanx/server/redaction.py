"""What a viewer sees of a job: other teams' jobs as occupancy, others' secrets redacted.

A job the viewer may not see (``Principal.sees``: not of its teams, not its own) shows
in lists only as queue occupancy: a stable opaque name, its queue, status, priority and
resources, so "why is my job pending" stays answerable; no command, env, labels, user
or messages. Of a job it sees but did not submit (``Principal.owns``), secret env values
show as ``<redacted>``. The store keeps the real values and the pods get them: only API
answers that carry a job spec (submit, list, describe, cancel) are redacted. A submit
whose name a job the viewer may not see holds is refused as every unavailable name is
(``unavailable_name``): job names are one namespace.

Which env names are secret (``SecretEnvRule``), case-insensitively:

- the name, split into words at every character that is not a letter or digit
  and at camelCase boundaries (``HF_TOKEN`` is HF, TOKEN; ``wandbApiKey`` is
  wandb, Api, Key; ``APIKey`` is API, Key), has a word in ``SECRET_WORDS``:
  TOKEN, SECRET, PASSWORD, PASSWD, PASSPHRASE, KEY, CREDENTIAL, their plurals, and
  the run-together APIKEY, ACCESSKEY, SECRETKEY, PRIVATEKEY, ACCESSTOKEN,
  AUTHTOKEN. Whole words only: ``TOKENIZERS_PARALLELISM`` and ``KEYBOARD_LAYOUT``
  are not secret;
- or the name matches one of the operator's patterns (``phalanx up --secret-env
  PATTERN``, repeatable): an exact name or a shell-style glob (``MYCORP_*``).
"""

from __future__ import annotations

import fnmatch
import hashlib
import hmac
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from phalanx.errors import Conflict, NotFound, SpecError
from phalanx.server.principal import ADMIN_ROLE, Principal
from phalanx.spec.resources import JobSpec, PodSet
from phalanx.spec.status import JobRecord

REDACTED = "<redacted>"
SECRET_WORDS = frozenset({
    "TOKEN", "TOKENS", "SECRET", "SECRETS", "PASSWORD", "PASSWORDS", "PASSWD", "PASSWDS",
    "PASSPHRASE", "KEY", "KEYS", "CREDENTIAL", "CREDENTIALS",
    "APIKEY", "ACCESSKEY", "SECRETKEY", "PRIVATEKEY", "ACCESSTOKEN", "AUTHTOKEN",
})
# Words of an env name: an acronym before a capitalised word (the "API" of "APIKey"),
# a capitalised or lower-case word, an all-capitals word, a number.
_WORDS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_PATTERN_CHARS = re.compile(r"^[A-Za-z0-9_.*?\[\]!-]+$")

Record = TypeVar("Record", bound=JobRecord)


def name_words(name: str) -> list[str]:
    """The words of an env name, upper-cased (see the module's docstring)."""
    return [word.upper() for word in _WORDS.findall(name)]


@dataclass(frozen=True, slots=True)
class SecretEnvRule:
    """Which env names hold secrets: the built-in words plus the operator's patterns."""

    extra: tuple[str, ...] = ()
    _upper: tuple[str, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        for pattern in self.extra:
            if not _PATTERN_CHARS.match(pattern):
                raise SpecError(
                    f"{pattern!r} is not an env name or glob pattern", field="--secret-env",
                    fix="give a name such as MYCORP_LOGIN or a pattern such as 'MYCORP_*' "
                    "(letters, digits, '_', '.', '-' and the glob characters * ? [ ] !)",
                )
        object.__setattr__(self, "_upper", tuple(p.upper() for p in self.extra))

    def is_secret(self, name: str) -> bool:
        if any(word in SECRET_WORDS for word in name_words(name)):
            return True
        upper = name.upper()
        return any(fnmatch.fnmatchcase(upper, pattern) for pattern in self._upper)

    def redact_env(self, env: dict[str, str]) -> dict[str, str]:
        return {k: REDACTED if self.is_secret(k) else v for k, v in env.items()}


Viewer = Principal
# An admin who owns no job (the dashboard's admin view): every job in full, secrets redacted.
ADMIN = Principal("", ADMIN_ROLE)
HIDDEN_USER = "hidden"
HIDDEN_PREFIX = "hidden-"  # hidden jobs' names; no job may take one


@dataclass(frozen=True, slots=True)
class Occupancy:
    """Turns another team's job into its queue occupancy. Its name becomes ``hidden-`` and
    an HMAC of the name under a server secret: stable across answers (a pending list can
    be followed) but not reversible by guessing names."""

    secret: bytes

    def hidden_name(self, name: str) -> str:
        digest = hmac.new(self.secret, name.encode(), hashlib.sha256).hexdigest()[:16]
        return f"{HIDDEN_PREFIX}{digest}"

    def of(self, record: Record) -> Record:
        name = self.hidden_name(record.name)
        # Constructed, not validated: the values are already parsed (milli-units).
        pod_sets = [PodSet.model_construct(name=p.name, replicas=p.replicas,
                                           min_replicas=p.min_replicas, resources=p.resources)
                    for p in record.spec.pod_sets]
        spec = JobSpec.model_construct(
            **{**dict(record.spec), "name": name, "pod_sets": pod_sets, "labels": {},
               "depends_on": [], "max_runtime": None})
        # The admission names the job too, and endpoints' URLs may.
        admission = None if record.admission is None else \
            record.admission.model_copy(update={"job": name})
        return record.model_copy(update={
            "name": name, "spec": spec, "user": HIDDEN_USER, "message": "",
            "pending_message": None, "exit_code": None, "stop_reason": None,
            "admission": admission, "endpoints": {}})


def redacted_spec(spec: JobSpec, rule: SecretEnvRule) -> JobSpec:
    """A copy of ``spec`` with secret env values replaced; ``spec`` itself is untouched."""
    pod_sets = [p.model_copy(update={"env": rule.redact_env(p.env)}) for p in spec.pod_sets]
    return spec.model_copy(update={"pod_sets": pod_sets})


def job_as_seen_by(record: Record, viewer: Viewer, rule: SecretEnvRule) -> Record:
    """The job as ``viewer`` may see it: all of it for its owner, secrets redacted otherwise
    (a caller shows a job the viewer may not see only through ``jobs_as_seen_by``)."""
    if viewer.owns(record):
        return record
    return record.model_copy(update={"spec": redacted_spec(record.spec, rule)})


def jobs_as_seen_by(
    records: Iterable[Record], viewer: Viewer, rule: SecretEnvRule,
    occupancy: Occupancy | None = None,
) -> list[Record]:
    """Jobs as ``viewer`` may see them; those it may not see as occupancy only (dropped
    when no ``occupancy`` is given)."""
    seen = []
    for record in records:
        if viewer.sees(record):
            seen.append(job_as_seen_by(record, viewer, rule))
        elif occupancy is not None:
            seen.append(occupancy.of(record))
    return seen


# A taken name's Conflict names the name's field: ``name``, or ``items[i].name`` in a batch.
_NAME_FIELD = re.compile(r"(?:items\[(\d+)\]\.)?name")


def unavailable_name(name: str, field: str) -> Conflict:
    """The answer for a name held by a job the caller may not see, or reserved: the same,
    so it tells that the name is unavailable (job names are shared by every team) and
    nothing of the job: that there is one, whose it is, its queue, its state."""
    return Conflict(f"the job name {name!r} is not available", field=field,
                    fix="job names are shared by every team: choose another (a prefix of "
                        "your team's keeps clear of others')")


def refuse_reserved_names(specs: Sequence[JobSpec], *, batch: bool) -> None:
    """Hidden jobs' names (``Occupancy``) are no job's: one could pose as another team's."""
    for i, spec in enumerate(specs):
        if spec.name.startswith(HIDDEN_PREFIX):
            raise unavailable_name(spec.name, f"items[{i}].name" if batch else "name")


def clash_as_seen_by(exc: Conflict, specs: Sequence[JobSpec], viewer: Viewer,
                     lookup: Callable[[str], Record]) -> Conflict:
    """A submit's Conflict as ``viewer`` may see it: as it is, unless a job the viewer
    may not see holds the name (``lookup`` finds it), which answers ``unavailable_name``."""
    field = _NAME_FIELD.fullmatch(exc.field or "")
    if field is None:
        return exc
    name = specs[int(field.group(1) or 0)].name
    try:
        holder = lookup(name)
    except NotFound:  # a batch that names it twice
        return exc
    return exc if viewer.sees(holder) else unavailable_name(name, exc.field or "name")
