#!/bin/sh
# The official postgres image's start, reduced: initialise PGDATA on first start (user, password,
# database from the POSTGRES_* environment, then /docker-entrypoint-initdb.d/*.sql), then run the
# server as "postgres" listening on all addresses with password authentication.
set -eu
as_postgres() { setpriv --reuid=postgres --regid=postgres --init-groups "$@"; }
if [ "${1:-postgres}" != "postgres" ]; then exec "$@"; fi
[ $# -gt 0 ] && shift
user=${POSTGRES_USER:-postgres}
database=${POSTGRES_DB:-$user}
mkdir -p "$PGDATA" && chown postgres:postgres "$PGDATA" && chmod 700 "$PGDATA"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  password_file=$(mktemp) && printf '%s\n' "${POSTGRES_PASSWORD:-postgres}" >"$password_file"
  chown postgres "$password_file"
  as_postgres initdb -D "$PGDATA" --username="$user" --pwfile="$password_file" --auth-local=trust \
    --auth-host=scram-sha-256 ${POSTGRES_INITDB_ARGS:-} >/dev/null
  rm -f "$password_file"
  printf 'host all all all scram-sha-256\n' >>"$PGDATA/pg_hba.conf"
  # The database, then /docker-entrypoint-initdb.d/*.sql, on a server reachable by socket only.
  as_postgres pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -c unix_socket_directories=/var/run/postgresql" -w start >/dev/null
  if [ "$database" != "postgres" ]; then
    as_postgres psql -q -h /var/run/postgresql -U "$user" -d postgres -c "CREATE DATABASE \"$database\""
  fi
  for script in /docker-entrypoint-initdb.d/*.sql; do
    [ -f "$script" ] || continue
    as_postgres psql -q -v ON_ERROR_STOP=1 -h /var/run/postgresql -U "$user" -d "$database" -f "$script"
  done
  as_postgres pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
fi
exec setpriv --reuid=postgres --regid=postgres --init-groups postgres -D "$PGDATA" \
  -c listen_addresses='*' -c unix_socket_directories=/var/run/postgresql "$@"
