#!/usr/bin/env bash
# Installs PostgreSQL for tests/state_postgres.rs (the PostgreSQL state store with two `serve`
# replicas): Debian's server package, which puts initdb/postgres/psql under
# /usr/lib/postgresql/N/bin and creates the `postgres` user the tests run the server as. The tests
# start their own server in a temp dir; this script starts none and disables none of the system's.
# A no-op when the binaries are there.
# Usage: scripts/install-postgres.sh   (as root; apt-get)
set -euo pipefail

# Debian 12 (bookworm) ships PostgreSQL 15; any 13+ works (the tests pick the newest installed).
PACKAGE="postgresql-15"

have() {
  for d in /usr/lib/postgresql/*/bin; do
    [[ -x "$d/initdb" && -x "$d/postgres" && -x "$d/psql" && -x "$d/pg_isready" ]] && return 0
  done
  return 1
}

if have && id postgres >/dev/null 2>&1; then
  exit 0
fi

command -v apt-get >/dev/null || { echo "install-postgres: apt-get not found; install PostgreSQL 13+ server binaries" >&2; exit 1; }
echo "install-postgres: apt-get install $PACKAGE" >&2
export DEBIAN_FRONTEND=noninteractive
# Do not let the package start a cluster of its own on the default port.
policy=/usr/sbin/policy-rc.d
added_policy=0
if [[ ! -e "$policy" ]]; then
  printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod +x "$policy" && added_policy=1
fi
trap 'if [[ $added_policy == 1 ]]; then rm -f "$policy"; fi' EXIT
if ! apt-get install -y --no-install-recommends "$PACKAGE" >/dev/null 2>&1; then
  apt-get update >/dev/null
  if ! apt-get install -y --no-install-recommends "$PACKAGE" >/dev/null; then
    # Another Debian release: its default version.
    apt-get install -y --no-install-recommends postgresql >/dev/null
  fi
fi
have || { echo "install-postgres: no initdb/postgres/psql under /usr/lib/postgresql/*/bin after the install" >&2; exit 1; }
echo "install-postgres: done ($(ls -d /usr/lib/postgresql/*/bin | tr '\n' ' '))" >&2
