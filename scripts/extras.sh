#!/usr/bin/env bash
# The README's everyday commands on the base install (`pip install -e .`, no extras), and
# each cheap extra's own commands on an install of that extra alone: the test extra brings
# every optional dependency, so only an install without them shows a command that needs one.
#
#   base        up -d, apply, submit (file, manifest and stdin), submit --wait, jobs, describe, logs,
#               wait, cancel, status, pools, queues, down; against a real control plane
#   sim         phalanx sim with plots (matplotlib); a control plane on the simulated plane,
#               as `python -m benchmarks.kueue_shapes` drives it
#   postgres    up -d with the store on $PHALANX_TEST_POSTGRES_URL (skipped when unset)
#   kubernetes  phalanx k8s render
# The mpi and ray extras are left out here: their commands need OpenMPI or a Ray cluster,
# and the test extra's end-to-end suites (tests/kinds/test_mpi.py, tests/e2e ray tests)
# run them.
#
# Each venv lives under .build/venvs/NAME and is rebuilt only when pyproject.toml or
# setup.py change (their digest, as scripts/test.sh keeps the compiled build's). With no
# arguments it runs every part; `scripts/extras.sh base sim` runs those.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
venvs=.build/venvs
digest=$(cat setup.py pyproject.toml | sha256sum | cut -d' ' -f1)
started=$SECONDS

# A venv with the package and extra $2 (empty: none), pip resolving the real dependencies.
venv() {
  local name=$1 extra=$2 dir=$venvs/$1
  if [ "$(cat "$dir/.digest" 2>/dev/null)" != "$digest" ]; then
    echo "extras: building the $name venv (pip install -e .${extra:+[$extra]})" >&2
    rm -rf "$dir"
    python3 -m venv "$dir"
    "$dir/bin/python" -m pip install -q --upgrade pip >&2
    "$dir/bin/python" -m pip install -q -e ".${extra:+[$extra]}" >&2
    echo "$digest" > "$dir/.digest"
  fi
  echo "$repo/$dir"
}

scratch=$(mktemp -d /tmp/phalanx-extras.XXXXXX)
homes=()
cleanup() {
  local home
  for home in "${homes[@]}"; do
    PHALANX_HOME=$home "$bin/phalanx" down --stop-jobs --timeout 10 >/dev/null 2>&1 || true
  done
  rm -rf "$scratch"
}
trap cleanup EXIT

# Run a command of the venv in use ($bin, $PHALANX_HOME); on a non-zero exit print what it
# said and the control plane's log, and stop. Its stdout is in $said.
said=""
run() {
  local code=0
  said=$("$@" 2>"$scratch/stderr") || code=$?
  if [ $code -ne 0 ]; then
    {
      echo "extras: FAILED (exit $code): $*"
      echo "--- stdout"; echo "$said"
      echo "--- stderr"; cat "$scratch/stderr"
      if [ -f "${PHALANX_HOME:-}/server.log" ]; then
        echo "--- the control plane's log (last 40 lines)"; tail -n 40 "$PHALANX_HOME/server.log"
      fi
    } >&2
    exit 1
  fi
}

# Expect exit code $1 from the rest; otherwise as run.
expect() {
  local want=$1 code=0
  shift
  said=$("$@" 2>"$scratch/stderr") || code=$?
  if [ $code -ne "$want" ]; then
    { echo "extras: FAILED: $* exited $code, not $want"; echo "$said"; cat "$scratch/stderr"
    } >&2
    exit 1
  fi
}

# A fresh state directory and credentials file: nothing of the user's is read or changed.
fresh_home() {
  export PHALANX_HOME=$scratch/$1
  export PHALANX_CREDENTIALS=$scratch/$1-credentials.json
  unset PHALANX_URL PHALANX_TOKEN PHALANX_API_KEY_FILE
  homes+=("$PHALANX_HOME")
}

up() { run "$bin/phalanx" up -d --port 0 "$@"; }
# A control plane running as root asks whom the local plane's pods run as.
as_me=(--run-as-user "$(id -u)")

base() {
  bin=$(venv base "")/bin
  PATH=$bin:$PATH  # the pods' `python` is the venv's, as after `. .venv/bin/activate`
  fresh_home base
  up "${as_me[@]}"
  run "$bin/phalanx" apply -f examples/queues.yaml
  run "$bin/phalanx" submit -f examples/hello-gang.yaml --queue team-a --wait
  run "$bin/phalanx" logs hello-gang
  grep -q "barrier passed with 4 ranks" <<<"$said" || { echo "extras: no barrier in: $said" >&2; exit 1; }
  run "$bin/phalanx" submit -f examples/manifests/job.yaml --queue team-a --wait  # a batch/v1 Job
  run "$bin/phalanx" submit -f - --queue team-b <<'EOF'
name: sleeper
podSets:
  - name: main
    resources: {cpu: 100m, memory: 64Mi}
    command: [python, -c, "import time; print('sleeping', flush=True); time.sleep(600)"]
EOF
  run "$bin/phalanx" jobs
  grep -q sleeper <<<"$said" || { echo "extras: sleeper not listed: $said" >&2; exit 1; }
  run "$bin/phalanx" describe hello-gang
  run "$bin/phalanx" status
  run "$bin/phalanx" queues
  run "$bin/phalanx" nodes
  run "$bin/phalanx" pools
  # `phalanx wait` gives up after --timeout (exit 1), then reports the cancelled job (exit 1).
  expect 1 "$bin/phalanx" wait sleeper --timeout 1
  run "$bin/phalanx" cancel sleeper
  expect 1 "$bin/phalanx" wait sleeper --timeout 60
  run "$bin/phalanx" wait hello-gang
  run "$bin/phalanx" down
}

sim() {
  bin=$(venv sim sim)/bin
  run "$bin/phalanx" sim --trace examples/what-if/trace.csv --queues examples/what-if/queues.yaml \
    --nodes examples/what-if/nodes.yaml --policy fifo --policy phalanx \
    --json "$scratch/sim.json" --plots "$scratch/plots"
  [ -s "$scratch/plots/utilisation.png" ] || { echo "extras: sim wrote no plots" >&2; exit 1; }
  # What `python -m benchmarks.kueue_shapes` asks of a control plane on the simulated plane.
  run "$bin/python" -m benchmarks.kueue_shapes --help
  fresh_home sim
  up --compute simulated --nodes examples/nodes.yaml
  run "$bin/phalanx" apply -f examples/queues.yaml
  run "$bin/phalanx" status
  run "$bin/phalanx" pools
  run "$bin/phalanx" down
}

postgres() {
  if [ -z "${PHALANX_TEST_POSTGRES_URL:-}" ]; then
    echo "extras: PHALANX_TEST_POSTGRES_URL unset (source scripts/postgres.sh): postgres skipped" >&2
    return 0
  fi
  bin=$(venv postgres postgres)/bin
  local db="phalanx_extras_$$"
  run "$bin/python" - "$PHALANX_TEST_POSTGRES_URL" "$db" <<'EOF'
import sys
import psycopg
with psycopg.connect(sys.argv[1], autocommit=True) as conn:
    conn.execute(f"CREATE DATABASE {sys.argv[2]}")
EOF
  fresh_home postgres
  up "${as_me[@]}" --db "${PHALANX_TEST_POSTGRES_URL%/*}/$db"
  run "$bin/phalanx" apply -f examples/queues.yaml
  run "$bin/phalanx" status
  grep -qi postgres <<<"$said" || { echo "extras: status names no PostgreSQL: $said" >&2; exit 1; }
  run "$bin/phalanx" down
}

kubernetes() {
  bin=$(venv kubernetes kubernetes)/bin
  run "$bin/phalanx" k8s render
  grep -q "kind: Deployment" <<<"$said" || { echo "extras: render made no Deployment" >&2; exit 1; }
  run "$bin/phalanx" k8s values
  run "$bin/phalanx" k8s render -f - <<<"$said"
}

bin=""
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(base sim postgres kubernetes)
for part in "${parts[@]}"; do
  case $part in
    base|sim|postgres|kubernetes) part_start=$SECONDS; "$part"
      echo "extras: $part passed ($((SECONDS - part_start)) s)" >&2 ;;
    *) echo "extras: no part $part (base, sim, postgres, kubernetes)" >&2; exit 2 ;;
  esac
done
echo "extras: all passed in $((SECONDS - started)) s" >&2
