#!/usr/bin/env bash
# docs/settings.md, generated from the registry of settings (src/base/settings_table.cpp and the
# settings that libpmr-mpi and libqmp declare) by pmr-info --markdown, so that it cannot drift from
# it. The README links to it.
#   scripts/settings-docs.sh PMR_INFO           rewrite it
#   scripts/settings-docs.sh --check PMR_INFO   exit 1 (with a diff) if it differs
# PMR_INFO is the pmr-info program (build/bin/pmr-info).
set -euo pipefail
check=0
if [ "${1:-}" = --check ]; then
  check=1
  shift
fi
info=${1:?usage: scripts/settings-docs.sh [--check] path/to/pmr-info}
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$info" --markdown >"$tmp/settings.md"
if [ $check = 1 ]; then
  if ! diff -u docs/settings.md "$tmp/settings.md"; then
    echo "settings-docs: docs/settings.md differs from the registry; run" \
      "scripts/settings-docs.sh $info" >&2
    exit 1
  fi
  exit 0
fi
cp "$tmp/settings.md" docs/settings.md
