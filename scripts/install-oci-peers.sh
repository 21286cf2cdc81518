#!/usr/bin/env bash
# Installs what tests/oci.rs runs against, from Debian's packages: a real OCI registry
# (`docker-registry`, the CNCF distribution registry), Debian's `minisign` (to cross-check
# toolhost's signatures) and `htpasswd` (apache2-utils, for the basic-auth registry). Versions
# are Debian bookworm's; a machine that already has the three binaries is left alone. Then the
# ORAS project's Python SDK (`oras` from PyPI, pinned) in a venv at .peers/oras, the independent
# client the interop test pushes and pulls with.
# Usage: scripts/install-oci-peers.sh   (as root, or with the binaries already installed)
set -euo pipefail

REGISTRY_VERSION="2.8.2+ds1-1"
MINISIGN_VERSION="0.11-1"

ORAS_PY="oras==0.2.43"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
oras_venv="$root/.peers/oras"
if [[ "$(cat "$oras_venv/.installed" 2>/dev/null)" != "$ORAS_PY" ]] || ! "$oras_venv/bin/python" -c 'import oras.client' 2>/dev/null; then
  echo "install-oci-peers: pip $ORAS_PY" >&2
  rm -rf "$oras_venv"
  mkdir -p "$root/.peers"
  python3 -m venv "$oras_venv"
  "$oras_venv/bin/python" -m pip install --quiet --disable-pip-version-check "$ORAS_PY"
  "$oras_venv/bin/python" -c 'import oras.client'
  printf '%s' "$ORAS_PY" > "$oras_venv/.installed"
fi

have() { [[ -x /usr/bin/docker-registry ]] && command -v minisign >/dev/null && command -v htpasswd >/dev/null; }
have && exit 0

if [[ "$(id -u)" != 0 ]]; then
  echo "install-oci-peers: docker-registry, minisign and htpasswd are missing; run as root or: apt-get install docker-registry minisign apache2-utils" >&2
  exit 1
fi
echo "install-oci-peers: apt-get install docker-registry minisign apache2-utils" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# The pinned versions when the archive still has them; the archive's otherwise (a point release).
apt-get install -y -qq --no-install-recommends \
    "docker-registry=$REGISTRY_VERSION" "minisign=$MINISIGN_VERSION" apache2-utils >/dev/null \
  || apt-get install -y -qq --no-install-recommends docker-registry minisign apache2-utils >/dev/null
# The package's own service is not used: tests start registries of their own on loopback.
systemctl disable --now docker-registry >/dev/null 2>&1 || true
have || { echo "install-oci-peers: the binaries are still missing after apt-get install" >&2; exit 1; }
