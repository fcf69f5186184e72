"""Secrets in a job's env are shown to its owner only; everyone else sees ``<redacted>``.

The store keeps the real values and the pods get them: only API answers that
carry a job spec (submit, list, describe, cancel) are redacted, and only for a
viewer who does not own the job. There are no owners yet (teams and per-user
tokens come later), so today no viewer owns any job and every secret is redacted;
``Viewer.owns`` is the one place that changes then.

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
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from phalanx.errors import SpecError
from phalanx.spec.resources import JobSpec
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


@dataclass(frozen=True, slots=True)
class Viewer:
    """Who asks the API. Today one admin token, which owns no job."""

    name: str

    def owns(self, record: JobRecord) -> bool:
        """Whether this viewer may see the job's secrets (its owner, once jobs have one)."""
        return False


ADMIN = Viewer("admin")


def redacted_spec(spec: JobSpec, rule: SecretEnvRule) -> JobSpec:
    """A copy of ``spec`` with secret env values replaced; ``spec`` itself is untouched."""
    pod_sets = [p.model_copy(update={"env": rule.redact_env(p.env)}) for p in spec.pod_sets]
    return spec.model_copy(update={"pod_sets": pod_sets})


def job_as_seen_by(record: Record, viewer: Viewer, rule: SecretEnvRule) -> Record:
    """The job as ``viewer`` may see it: all of it for its owner, secrets redacted otherwise."""
    if viewer.owns(record):
        return record
    return record.model_copy(update={"spec": redacted_spec(record.spec, rule)})


def jobs_as_seen_by(
    records: Iterable[Record], viewer: Viewer, rule: SecretEnvRule
) -> list[Record]:
    return [job_as_seen_by(r, viewer, rule) for r in records]
