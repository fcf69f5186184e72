"""Every test and every process it starts reads its login credentials from a file of the
test session's own, never the user's (``phalanx login`` may have written one)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

_CREDENTIALS = Path(tempfile.mkdtemp(prefix="phalanx-credentials-")) / "credentials.json"
os.environ["PHALANX_CREDENTIALS"] = str(_CREDENTIALS)
