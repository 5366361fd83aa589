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
# duckq (tools/duckq, its own module) is DuckDB for the tests that query
# the archive with SQL (deploy/athena). DuckDB is a C++ library linked
# with cgo, so it needs a C compiler; CI (Debian, root) installs gcc.
duckq_src=(tools/duckq/go.mod tools/duckq/go.sum tools/duckq/main.go)
if [ -f tools/duckq/go.mod ]; then
  stamp="$bin/.duckq.sum"
  if [ ! -x "$bin/duckq" ] || ! cat "${duckq_src[@]}" | cmp -s - "$stamp" 2>/dev/null; then
    if ! command -v gcc >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      echo "installing gcc for duckq (cgo)"
      apt-get update -qq && apt-get install -y -qq gcc >/dev/null
    fi
    echo "building duckq (DuckDB) from tools/duckq/go.mod"
    if ! (cd tools/duckq && CGO_ENABLED=1 go build -o "$bin/duckq" .); then
      echo "building duckq failed: DuckDB is linked with cgo and needs a C compiler (apt-get install gcc)" >&2
      exit 1
    fi
    cat "${duckq_src[@]}" >"$stamp"
  fi
fi
