#!/usr/bin/env bash
# Runs every Fuzz target of the module for a short time each.
#
# Go's fuzzing coordinator sometimes ends a time-bounded run with a bare
# "context deadline exceeded" failure and no failing input, when the time
# runs out while a worker is busy with an input; that says nothing about the
# code. Such a run is repeated once. A run that wrote a failing input (or
# panicked) fails at once.
set -uo pipefail
fuzztime=${1:-5s}
cd "$(dirname "$0")/.."
status=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
run() { # pkg target
  go test -run '^$' -fuzz "^$2\$" -fuzztime "$fuzztime" "$1" >"$log" 2>&1
  local rc=$?
  cat "$log"
  return $rc
}
while IFS= read -r file; do
  pkg="./$(dirname "$file")"
  for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)' "$file" | awk '{print $2}'); do
    echo "fuzz $pkg $target ($fuzztime)"
    if run "$pkg" "$target"; then
      continue
    fi
    if grep -q 'context deadline exceeded' "$log" && ! grep -qE 'Failing input written|panic:' "$log"; then
      echo "fuzz $pkg $target: the coordinator's deadline flake, no failing input; running once more"
      run "$pkg" "$target" && continue
    fi
    status=1
  done
done < <(grep -rl --include='*_test.go' -E '^func Fuzz' . | sort)
exit $status
