#!/usr/bin/env bash
# Builds the test-only servers pinned in tools/go.mod into $1 (default
# .tools/bin). Idempotent: skips what is already built at the pinned version.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-$PWD/.tools/bin}
mkdir -p "$bin"
if [ -f tools/go.mod ]; then
  stamp="$bin/.tools.sum"
  if [ ! -x "$bin/versitygw" ] || ! cmp -s tools/go.sum "$stamp" 2>/dev/null; then
    echo "building versitygw from tools/go.mod"
    GOFLAGS=-mod=mod go build -modfile=tools/go.mod -o "$bin/versitygw" github.com/versity/versitygw/cmd/versitygw
    cp tools/go.sum "$stamp"
  fi
fi
