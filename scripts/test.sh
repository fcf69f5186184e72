#!/usr/bin/env bash
# Install Phalanx with its test dependencies into .venv, start PostgreSQL on
# loopback, and run the whole test suite. Arguments are passed to pytest.
#
# The suite runs in PHALANX_TEST_WORKERS processes (pytest-xdist, a test file per process
# at a time, so a module's shared control plane starts once); the default, 3, is more than
# a 2-core machine's cores because most tests wait on processes and HTTP. 0 runs it in
# this one process.
#
# With no arguments (the README's and CI's command) the scheduler core is also
# built as wheels ship it, compiled with mypyc, into .build/compiled, and its tests
# (tests/scheduler, tests/sim) run a second time against that build. The build is
# reused while the core's sources are unchanged. Then scripts/extras.sh runs the README's
# everyday commands on the base install (no extras) and each cheap extra's on its own.
# These run alongside the main suite, one after the other; what they print is shown
# when they end.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${PHALANX_VENV:-.venv}
workers=${PHALANX_TEST_WORKERS:-3}
# OpenMPI for kind: mpi's tests (and mpi4py, built against it by pip in the test extra).
if ! command -v mpirun >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "installing Debian's openmpi-bin and libopenmpi-dev..." >&2
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    openmpi-bin libopenmpi-dev) >/dev/null 2>&1 || echo "could not install OpenMPI" >&2
fi
# The install is redone only when what it reads changes (setup.py, pyproject.toml, these
# requirements), as scripts/extras.sh's venvs are: pip's no-op resolve of the test extra
# takes tens of seconds on a busy 2-core machine, and the suite waits for it.
requirements=(-e '.[test]' torch==2.13.0)
install_digest=$(cat setup.py pyproject.toml <(printf "%s\n" "${requirements[@]}") | sha256sum | cut -d' ' -f1)
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
if [ "$(cat "$venv/.phalanx-test-digest" 2>/dev/null)" != "$install_digest" ]; then
  "$venv/bin/python" -m pip install -q --upgrade pip >/dev/null
  "$venv/bin/python" -m pip install -q "${requirements[@]}"
  echo "$install_digest" > "$venv/.phalanx-test-digest"
fi
# shellcheck source=scripts/postgres.sh
source scripts/postgres.sh
# shellcheck source=scripts/chromium.sh
source scripts/chromium.sh

# The compiled core's tests, then scripts/extras.sh.
compiled_and_extras() {
  local compiled=.build/compiled digest status=0
  digest=$(find src/phalanx/scheduler -name '*.py' | LC_ALL=C sort | xargs cat setup.py pyproject.toml \
    | sha256sum | cut -d' ' -f1)
  if [ "$(cat "$compiled/.digest" 2>/dev/null)" != "$digest" ]; then
    echo "building the compiled scheduler core (about two minutes)"
    rm -rf "$compiled"
    "$venv/bin/python" -m pip install -q --no-deps --target "$compiled" .
    echo "$digest" > "$compiled/.digest"
  fi
  PYTHONPATH="$compiled" PHALANX_EXPECT_COMPILED=1 \
    "$venv/bin/python" -m pytest -q tests/scheduler tests/sim || status=$?
  scripts/extras.sh || status=$?
  return $status
}

status=0
side=""
if [ $# -eq 0 ]; then
  side_log=$(mktemp /tmp/phalanx-test-side.XXXXXX)
  compiled_and_extras >"$side_log" 2>&1 &
  side=$!
  trap 'kill "$side" 2>/dev/null || true' INT TERM
fi
# xdist's own order (the files with the most tests first): handing the slow directories'
# files out first ran every Ray cluster and replica group of the suite at once, and their
# start-up timed out on a 2-core machine.
"$venv/bin/python" -m pytest -q -n "$workers" --dist loadfile "$@" || status=$?
if [ -n "$side" ]; then
  echo "--- the compiled core's tests and scripts/extras.sh"
  wait "$side" || status=$?
  cat "$side_log"
  rm -f "$side_log"
fi
if [ -n "${PHALANX_TEST_POSTGRES_STOP:-}" ]; then $PHALANX_TEST_POSTGRES_STOP >/dev/null 2>&1 || true; fi
exit $status
