#!/usr/bin/env bash
# Runs every Fuzz target of the module for a short time each.
set -euo pipefail
fuzztime=${1:-5s}
cd "$(dirname "$0")/.."
status=0
while IFS= read -r file; do
  pkg="./$(dirname "$file")"
  for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)' "$file" | awk '{print $2}'); do
    echo "fuzz $pkg $target ($fuzztime)"
    if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"; then
      status=1
    fi
  done
done < <(grep -rl --include='*_test.go' -E '^func Fuzz' . | sort)
exit $status
