#!/usr/bin/env bash
# Install Phalanx with its test dependencies into .venv, start PostgreSQL on
# loopback, and run the whole test suite. Arguments are passed to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${PHALANX_VENV:-.venv}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip >/dev/null
"$venv/bin/python" -m pip install -q -e '.[test]' torch==2.13.0
# shellcheck source=scripts/postgres.sh
source scripts/postgres.sh
status=0
"$venv/bin/python" -m pytest -q "$@" || status=$?
if [ -n "${PHALANX_TEST_POSTGRES_STOP:-}" ]; then $PHALANX_TEST_POSTGRES_STOP >/dev/null 2>&1 || true; fi
exit $status
