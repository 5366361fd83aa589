#!/usr/bin/env bash
# `make conformance-peers`: measures this project's engine, moto, dynalite
# and Dynoxide with `archiver conformance` and writes the table into
# docs/CONFORMANCE.md. Not part of `make test`: it installs the peers
# (moto from pip, dynalite and Dynoxide from npm, under .tools/) and waits
# in real time, all five endpoints at once on loopback ports from
# CONFORMANCE_PORT (18100) up.
#
#   CONFORMANCE_BOUND=2m  the expiry bound every run is given
#   CONFORMANCE_SLOW=1    also measure iterator expiry in real time (about
#                         16 minutes more); 0 skips that check
#
# A peer that cannot be installed or started is in the table as not
# measured, with the error. The runs' JSON reports and the servers' logs
# stay in .tools/conformance/.
set -uo pipefail
cd "$(dirname "$0")/.."

OUT=.tools/conformance
NPM=.tools/npm
BOUND=${CONFORMANCE_BOUND:-2m}
SLOW=${CONFORMANCE_SLOW:-1}
PORT=${CONFORMANCE_PORT:-18100}
rm -rf "$OUT"
mkdir -p "$OUT" "$NPM"

echo "building bin/archiver..."
CGO_ENABLED=0 go build -trimpath -ldflags "-X main.version=$(git describe --always --dirty 2>/dev/null)" -o bin/archiver ./cmd/archiver || exit 1

servers=() # the peers and engines this script started
runs=()    # the conformance runs
cleanup() {
	for p in "${runs[@]}" "${servers[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
}
trap cleanup EXIT

# wait_port PORT: until something listens on 127.0.0.1:PORT (60 s at most).
wait_port() {
	for _ in $(seq 300); do
		(echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.2
	done
	return 1
}

# measure NAME PORT 'FLAGS' COMMAND...: starts COMMAND (a server on PORT)
# and, once it listens, `archiver conformance` against it in the
# background, with FLAGS besides the bound.
measure() {
	local name=$1 port=$2 flags=$3
	shift 3
	if (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
		echo "port $port is taken: set CONFORMANCE_PORT" >"$OUT/$name.err"
		return
	fi
	"$@" >"$OUT/$name.log" 2>&1 &
	servers+=($!)
	if ! wait_port "$port"; then
		echo "did not listen on 127.0.0.1:$port within 60 s: $(tail -c 300 "$OUT/$name.log" | tr '\n' ' ')" >"$OUT/$name.err"
		return
	fi
	local slow=""
	[ "$SLOW" = 1 ] && slow=--slow
	# shellcheck disable=SC2086 # flags are words
	bin/archiver conformance --endpoint "http://127.0.0.1:$port" --expiry-bound "$BOUND" $flags $slow --json \
		>"$OUT/$name.json" 2>"$OUT/$name.stderr" &
	runs+=($!)
	echo "measuring $name on 127.0.0.1:$port"
}

# install: the peers, each only when missing; one that fails to install
# leaves its error in $OUT/NAME.err, and the table says so.
case "$(uname -m)" in aarch64 | arm64) DYNOXIDE_PKG=@dynoxide/linux-arm64 ;; *) DYNOXIDE_PKG=@dynoxide/linux-x64 ;; esac
npm_install() { # NAME PACKAGE
	[ -e "$NPM/node_modules/$2/package.json" ] && return
	npm install --silent --no-audit --no-fund --prefix "$NPM" "$2" >"$OUT/$1.install" 2>&1 || cp "$OUT/$1.install" "$OUT/$1.err"
}
install() {
	if ! python3 -c 'import moto.server' 2>/dev/null; then
		python3 -m pip install --quiet 'moto[server]' >"$OUT/moto.install" 2>&1 || cp "$OUT/moto.install" "$OUT/moto.err"
	fi
	npm_install dynalite dynalite
	npm_install dynoxide "$DYNOXIDE_PKG"
}

npm_version() { node -p "require('./$NPM/node_modules/$1/package.json').version" 2>/dev/null || echo "?"; }

echo "installing the peers (moto from pip, dynalite and Dynoxide from npm)..."
install
MOTO_V=$(python3 -c 'import moto; print(moto.__version__)' 2>/dev/null || echo "?")
DYNALITE_V=$(npm_version dynalite)
DYNOXIDE_V=$(npm_version "$DYNOXIDE_PKG")

measure engine $((PORT)) "" bin/archiver engine --listen "127.0.0.1:$((PORT))" --ttl-interval 200ms --shard-rollover 20 --log-level warn
measure engine-control $((PORT + 1)) --engine-control bin/archiver engine --listen "127.0.0.1:$((PORT + 1))" --manual-clock --ttl-interval -1 --log-level warn
[ -e "$OUT/moto.err" ] || measure moto $((PORT + 2)) "" python3 -m moto.server -H 127.0.0.1 -p $((PORT + 2))
[ -e "$OUT/dynalite.err" ] || measure dynalite $((PORT + 3)) "" "$NPM/node_modules/.bin/dynalite" --host 127.0.0.1 --port $((PORT + 3))
[ -e "$OUT/dynoxide.err" ] || measure dynoxide $((PORT + 4)) "" "$NPM/node_modules/$DYNOXIDE_PKG/dynoxide" serve --host 127.0.0.1 --port $((PORT + 4))

echo "waiting for the runs (expiry bound $BOUND$([ "$SLOW" = 1 ] && echo ', iterator expiry in real time: about 20 minutes'))..."
for p in "${runs[@]}"; do wait "$p"; done
runs=()

# column NAME LABEL: the NAME=FILE argument of mktable for one endpoint.
column() {
	if [ -s "$OUT/$1.json" ]; then
		echo "$2=$OUT/$1.json"
		return
	fi
	[ -e "$OUT/$1.err" ] || cat "$OUT/$1.stderr" >"$OUT/$1.err" 2>/dev/null || echo "no report" >"$OUT/$1.err"
	echo "$2=$OUT/$1.err"
}

note="Measured on $(date -u +%Y-%m-%d) by \`make conformance-peers\` on this project's 2-core machine: expiry bound $BOUND$([ "$SLOW" = 1 ] && echo ', `--slow`'), all five runs at once."
go run ./conformance/mktable -o docs/CONFORMANCE.md -note "$note" \
	"$(column engine "engine, real time")" \
	"$(column engine-control "engine, --engine-control")" \
	"$(column moto "moto $MOTO_V")" \
	"$(column dynalite "dynalite $DYNALITE_V")" \
	"$(column dynoxide "Dynoxide $DYNOXIDE_V")" || exit 1
echo "wrote the table into docs/CONFORMANCE.md (reports in $OUT/)"
