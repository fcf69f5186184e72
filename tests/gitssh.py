"""A git repository "over ssh" without an ssh server: an ``ssh`` program for PATH that
serves ``ssh://HOST/PATH`` from this machine and records what it was run with.

git runs ``$GIT_SSH_COMMAND`` (``ssh -i KEY ... HOST 'git-upload-pack '/path''``) for an
ssh:// URL; this ``ssh`` runs the remote command here, as sshd would run it there, so the
fetch is a real git transport. Before that it appends a line to its log: the host, the
options, and the SHA-256, mode and path of the file ``-i`` named (null when none did), so a
test sees which key git was given, that it was private, and, after, that it is gone.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

_SSH = """#!{python}
import hashlib, json, os, stat, sys
args, key, options, rest, i = sys.argv[1:], None, [], [], 0
while i < len(args):
    if args[i] in ("-i", "-o", "-p", "-l", "-F", "-E"):
        if args[i] == "-i":
            key = args[i + 1]
        elif args[i] == "-o":
            options.append(args[i + 1])
        i += 2
    elif args[i].startswith("-"):
        i += 1
    else:
        rest.append(args[i])
        i += 1
seen = None
if key is not None:
    seen = {{"path": key, "sha256": hashlib.sha256(open(key, "rb").read()).hexdigest(),
             "mode": oct(stat.S_IMODE(os.stat(key).st_mode))}}
with open({log!r}, "a") as out:
    out.write(json.dumps({{"host": rest[0], "key": seen, "options": options}}) + "\\n")
os.execvp("sh", ["sh", "-c", " ".join(rest[1:])])
"""

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]


def fake_ssh(where: Path) -> tuple[Path, Path]:
    """A directory holding the ``ssh`` program (put it first on PATH) and its log."""
    bin_dir = where / "bin"
    bin_dir.mkdir(parents=True)
    log = where / "ssh.log"
    program = bin_dir / "ssh"
    program.write_text(_SSH.format(python=sys.executable, log=str(log)))
    program.chmod(0o755)
    where.chmod(0o755)
    return bin_dir, log


def calls(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def bare_repo(where: Path, files: dict[str, str]) -> tuple[Path, str]:
    """A bare repository (readable by anyone) whose main holds ``files``; and its commit."""
    work, bare = where / "work", where / "repo.git"
    subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True)
    for name, text in files.items():
        (work / name).write_text(text)
    subprocess.run([*GIT, "-C", str(work), "add", "."], check=True)
    subprocess.run([*GIT, "-C", str(work), "commit", "-qm", "v1"], check=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True)
    commit = subprocess.run(["git", "-C", str(bare), "rev-parse", "main"], check=True,
                            capture_output=True, text=True).stdout.strip()
    return bare, commit


# A key that is a key only in shape: this ssh never checks it, only its bytes and mode.
FAKE_KEY = ("-----BEGIN OPENSSH PRIVATE KEY-----\n"
            "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ-%s\n"
            "-----END OPENSSH PRIVATE KEY-----\n")
