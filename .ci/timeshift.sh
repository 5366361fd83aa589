#!/usr/bin/env bash
# Runs the test suite with every clock moved forward: the standard library's
# time.Now is overlaid (go build -overlay) with a copy that adds DAYS days,
# in the test binaries, in every binary the tests build (GOFLAGS carries the
# overlay to their `go build`), and in the versitygw the S3 tests start (its
# request-time check would refuse a shifted client). A test that passes today
# but fails here compares a fixed date with the real clock: a fixture that
# will age past a cut-off. Not part of `make test` (it rebuilds the standard
# library and versitygw); run it as `make test-timeshift [DAYS=400]` after
# adding dated fixtures.
set -euo pipefail
days=${1:-400}
shift || true
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
goroot=$(go env GOROOT)
src="$goroot/src/time/time.go"
awk -v days="$days" '
  { print }
  prev == "func Now() Time {" && /sec, nsec, mono := runtimeNow\(\)/ { print "\tsec += " days " * 86400 // .ci/timeshift.sh"; done = 1 }
  { prev = $0 }
  END { if (!done) { print "time.Now no longer reads as expected: update .ci/timeshift.sh" > "/dev/stderr"; exit 1 } }
' "$src" >"$work/time.go"
printf '{"Replace":{"%s":"%s"}}\n' "$src" "$work/time.go" >"$work/overlay.json"
export GOFLAGS="-overlay=$work/overlay.json"
mkdir -p "$work/bin"
echo "building versitygw with the clock $days days ahead"
GOFLAGS="$GOFLAGS -mod=mod" go build -modfile=tools/go.mod -o "$work/bin/versitygw" github.com/versity/versitygw/cmd/versitygw
export PATH="$work/bin:$PATH"
echo "go test with the clock $days days ahead"
go test -count=1 -p 1 -timeout 30m "${@:-./...}"
