#!/usr/bin/env bash
# A throwaway PostgreSQL server for tests: initdb into a fresh directory, a
# server listening only on a unix socket inside it (no TCP port, so parallel
# tests never collide), torn down with `stop`.
#
#   pg_test_server.sh start DIR [WATCH_PID]  prints a libpq URL for database
#                                             `nightshift` (user `nightshift`, trust auth)
#   pg_test_server.sh restart DIR             stops the server (fast: connections are cut) and
#                                             starts it again, as a server upgrade or crash would
#   pg_test_server.sh stop DIR                stops the server and removes DIR
#
# DIR must not exist yet (it is created) or be empty. With WATCH_PID, a small
# watcher stops the server when that process is gone, so a test that crashes
# leaves no server behind. PostgreSQL refuses to run as root: as root, the
# server runs as the `postgres` user (else `nobody`). Exit 77 (and a reason on
# stderr) when the PostgreSQL server binaries are not installed: the caller
# skips. Server settings favour speed over durability (fsync off): test data only.
set -euo pipefail

die() {
  echo "pg_test_server: $*" >&2
  exit 1
}

find_bindir() {
  if [[ -n "${PG_BINDIR:-}" ]]; then  # set: that directory or none (PG_BINDIR=/none tests the skip)
    if [[ -x "$PG_BINDIR/initdb" && -x "$PG_BINDIR/postgres" ]]; then echo "$PG_BINDIR"; fi
    return 0
  fi
  if command -v pg_config > /dev/null; then
    local d
    d=$(pg_config --bindir 2> /dev/null || true)
    if [[ -n "$d" && -x "$d/initdb" && -x "$d/postgres" ]]; then
      echo "$d"
      return
    fi
  fi
  local best=""
  for d in /usr/lib/postgresql/*/bin; do
    [[ -x "$d/initdb" && -x "$d/postgres" ]] && best=$d  # the glob sorts; the last is usually the newest
  done
  if [[ -z "$best" ]] && command -v initdb > /dev/null && command -v postgres > /dev/null; then
    best=$(dirname "$(command -v initdb)")
  fi
  echo "$best"
}

# Runs a command as the server's user (root cannot run PostgreSQL).
as_server_user() {
  if [[ "$(id -u)" == 0 ]]; then
    runuser -u "$SERVER_USER" -- "$@"
  else
    "$@"
  fi
}

server_user() {
  if [[ "$(id -u)" != 0 ]]; then
    id -un
  elif id postgres > /dev/null 2>&1; then
    echo postgres
  else
    echo nobody
  fi
}

cmd=${1:-}
dir=${2:-}
[[ -n "$cmd" && -n "$dir" ]] || die "usage: $0 start DIR [WATCH_PID] | restart DIR | stop DIR"
BINDIR=$(find_bindir)
SERVER_USER=$(server_user)

case "$cmd" in
  start)
    if [[ -z "$BINDIR" ]]; then
      echo "pg_test_server: PostgreSQL server binaries (initdb, postgres) not found; install the Debian" \
        "package postgresql (scripts/install-deps.sh) or set PG_BINDIR" >&2
      exit 77
    fi
    mkdir -p "$dir"
    [[ -z "$(ls -A "$dir")" ]] || die "$dir is not empty"
    dir=$(cd "$dir" && pwd)
    [[ "$(id -u)" != 0 ]] || chown "$SERVER_USER" "$dir"
    chmod 700 "$dir"
    as_server_user "$BINDIR/initdb" --pgdata="$dir/data" --username=nightshift --auth=trust --encoding=UTF8 \
      --locale=C --no-sync > "$dir/initdb.log" 2>&1 || {
      cat "$dir/initdb.log" >&2
      die "initdb failed"
    }
    # The socket directory must be reachable by the test's user (root can; so can the owner).
    as_server_user "$BINDIR/pg_ctl" --pgdata="$dir/data" --log="$dir/server.log" --wait --timeout=60 \
      -o "-c listen_addresses='' -c unix_socket_directories='$dir' -c fsync=off -c synchronous_commit=off
          -c full_page_writes=off -c max_connections=60 -c shared_buffers=32MB" \
      start > /dev/null 2>&1 || {
      cat "$dir/server.log" >&2 || true
      die "the server did not start"
    }
    as_server_user "$BINDIR/psql" -h "$dir" -U nightshift -d postgres -qAt -v ON_ERROR_STOP=1 \
      -c "CREATE DATABASE nightshift" > /dev/null || die "CREATE DATABASE failed"
    if [[ -n "${3:-}" ]]; then
      # Stops the server once the watched process is gone (a crashed test runner).
      watched=$3
      (
        trap '' HUP
        while kill -0 "$watched" 2> /dev/null && [[ -d "$dir/data" ]]; do sleep 1; done
        if [[ -d "$dir/data" ]]; then
          as_server_user "$BINDIR/pg_ctl" --pgdata="$dir/data" -m immediate stop > /dev/null 2>&1 || true
          rm -rf "$dir"
        fi
      ) < /dev/null > /dev/null 2>&1 &
      disown
    fi
    echo "postgresql:///nightshift?host=$dir&user=nightshift"
    ;;
  restart)
    [[ -n "$BINDIR" && -d "$dir/data" ]] || die "no server in $dir"
    as_server_user "$BINDIR/pg_ctl" --pgdata="$dir/data" --log="$dir/server.log" -m fast --wait --timeout=60 \
      restart > /dev/null 2>&1 || {
      cat "$dir/server.log" >&2 || true
      die "the server did not restart"
    }
    ;;
  stop)
    if [[ -d "$dir/data" && -n "$BINDIR" ]]; then
      as_server_user "$BINDIR/pg_ctl" --pgdata="$dir/data" -m immediate --wait stop > /dev/null 2>&1 || true
    fi
    rm -rf "$dir"
    ;;
  *)
    die "unknown command $cmd (start, restart or stop)"
    ;;
esac
