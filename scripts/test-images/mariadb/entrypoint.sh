#!/bin/sh
# Initialises the data directory on first start, then runs mariadbd on all addresses with an init
# file that gives root access from any address (idempotent, so it runs on every start).
set -eu
if [ "${1:-mariadbd}" != "mariadbd" ]; then exec "$@"; fi
[ $# -gt 0 ] && shift
if [ -z "${MARIADB_ROOT_PASSWORD:-}" ] && [ "${MARIADB_ALLOW_EMPTY_ROOT_PASSWORD:-}" != "1" ]; then
  echo "set MARIADB_ROOT_PASSWORD or MARIADB_ALLOW_EMPTY_ROOT_PASSWORD=1" >&2
  exit 1
fi
if [ ! -d /var/lib/mysql/mysql ]; then
  mariadb-install-db --user=mysql --datadir=/var/lib/mysql --skip-test-db >/dev/null
fi
password=$(printf '%s' "${MARIADB_ROOT_PASSWORD:-}" | sed "s/'/''/g")
{
  echo "CREATE USER IF NOT EXISTS 'root'@'%' IDENTIFIED BY '$password';"
  echo "GRANT ALL ON *.* TO 'root'@'%' WITH GRANT OPTION;"
  if [ -n "${MARIADB_DATABASE:-}" ]; then echo "CREATE DATABASE IF NOT EXISTS \`$MARIADB_DATABASE\`;"; fi
} >/run/mysqld/init.sql
chown mysql /run/mysqld/init.sql
exec mariadbd --user=mysql --datadir=/var/lib/mysql --bind-address=0.0.0.0 --skip-name-resolve \
  --init-file=/run/mysqld/init.sql "$@"
