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
# Chromium for the engine console's browser tests (engine/ui_browser_test.go,
# driven from Go by chromedp): Debian's package, where apt has it. Without
# one the tests skip, saying why; a failed install is not a failed build.
if [ -z "${CHROMIUM:-}" ] && ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null \
  && ! command -v google-chrome >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing chromium for the engine console's browser tests"
    if ! (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null); then
      echo "installing chromium failed: the engine console's browser tests will skip" >&2
    fi
  else
    echo "no Chromium (apt-get install chromium, or set CHROMIUM): the engine console's browser tests will skip" >&2
  fi
fi
