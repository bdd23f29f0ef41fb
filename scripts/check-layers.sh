#!/usr/bin/env bash
# Checks that the source tree includes only downward:
#   include/pmr (public API)  <-  src/base  <-  src/rails, src/bootstrap  <-  src/providers
#   <-  src/core  <-  src/capi;  src/collectives builds on the public API and src/base only;
#   src/mpi (libpmr-mpi, the MPI interposer) and src/qmp (QMP on pmr) on the public API only.
# Public headers (<pmr/...>) may be included everywhere and include nothing from src/. A provider
# folder includes base, rails, bootstrap and providers/interface.hpp, never another provider.
#   scripts/check-layers.sh   (exit 1 and one line per violation)
set -euo pipefail
cd "$(dirname "$0")/.."

rank() {
  case "$1" in
    base) echo 0 ;;
    rails | bootstrap) echo 1 ;;
    providers) echo 2 ;;
    core) echo 3 ;;
    capi) echo 4 ;;
    collectives) echo 5 ;;
    mpi | qmp) echo 6 ;;
    *) echo 99 ;;
  esac
}

status=0
report() {
  echo "layering: $1"
  status=1
}

# Public headers: only other public headers and system headers.
while IFS=: read -r file line text; do
  report "$file:$line includes a source-tree header: $text"
done < <(grep -Hn '^#include "' include/pmr/*.hpp include/pmr/*.h 2>/dev/null || true)

while IFS= read -r file; do
  layer=${file#src/}
  layer=${layer%%/*}
  mine=$(rank "$layer")
  [ "$mine" = 99 ] && continue
  while IFS=: read -r line text; do
    target=$(sed -E 's/^#include "([^"]+)".*/\1/' <<<"$text")
    other=${target%%/*}
    theirs=$(rank "$other")
    [ "$theirs" = 99 ] && continue # a header of the same folder, e.g. "blob.hpp"
    if [ "$layer" = mpi ] || [ "$layer" = qmp ]; then
      if [ "$other" != "$layer" ]; then
        report "$file:$line: $layer builds on the public API only, not on $target"
      fi
    elif [ "$layer" = collectives ]; then
      if [ "$other" != base ] && [ "$other" != collectives ]; then
        report "$file:$line: collectives build on the public API and base only, not on $target"
      fi
    elif [ "$theirs" -gt "$mine" ]; then
      report "$file:$line: $layer includes upward: $target"
    elif [ "$theirs" = "$mine" ] && [ "$other" != "$layer" ]; then
      report "$file:$line: $layer includes its sibling layer: $target"
    elif [ "$layer" = providers ] && [ "$other" = providers ]; then
      own=$(cut -d/ -f3 <<<"$file")
      dep=$(cut -d/ -f2 <<<"$target")
      if [ "$dep" != "$own" ] && [ "$dep" != interface.hpp ]; then
        report "$file:$line: provider $own includes provider $dep: $target"
      fi
    fi
  done < <(grep -n '^#include "' "$file" || true)
done < <(git ls-files 'src/*.hpp' 'src/*.cpp' 'src/*.h' 'src/*.c'; git ls-files --others --exclude-standard 'src/*.hpp' 'src/*.cpp')

if [ $status -eq 0 ]; then
  echo "layering: every include points downward"
fi
exit $status
