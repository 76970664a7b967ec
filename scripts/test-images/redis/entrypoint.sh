#!/bin/sh
# redis-server with protected mode off (clients come through the bridge, not loopback).
set -eu
if [ "${1:-redis-server}" = "redis-server" ]; then
  [ $# -gt 0 ] && shift
  exec redis-server --protected-mode no "$@"
fi
exec "$@"
