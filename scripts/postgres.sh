# Source this file: starts a throw-away PostgreSQL on loopback and exports
# PHALANX_TEST_POSTGRES_URL. Installs Debian's postgresql first if it is missing.
# Skips quietly (leaving the variable unset) when it cannot, so SQLite tests still run.

_phalanx_pg_start() {
  local pgbin
  pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  if [ -z "$pgbin" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing Debian's postgresql..." >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql) >/dev/null 2>&1 || true
    pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  fi
  if [ -z "$pgbin" ]; then
    echo "PostgreSQL not available: PostgreSQL store tests will be skipped" >&2
    return 0
  fi
  local data port run=()
  data=$(mktemp -d /tmp/phalanx-pg.XXXXXX)
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  if [ "$(id -u)" = 0 ]; then
    chown postgres "$data"
    run=(runuser -u postgres --)
  fi
  "${run[@]}" "$pgbin/initdb" -D "$data/db" -A trust -U postgres >/dev/null
  "${run[@]}" "$pgbin/pg_ctl" -D "$data/db" -l "$data/log" -w \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $data -c fsync=off" start >/dev/null
  export PHALANX_TEST_POSTGRES_URL="postgresql://postgres@127.0.0.1:$port/postgres"
  export PHALANX_TEST_POSTGRES_STOP="${run[*]} $pgbin/pg_ctl -D $data/db -m immediate stop"
  echo "PostgreSQL $("$pgbin/postgres" --version | awk '{print $3}') on 127.0.0.1:$port" >&2
}
_phalanx_pg_start
