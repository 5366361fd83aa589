# TTL Archiver. `make run` shows the demo; `make test` is the whole suite
# (what CI runs); `make bench` prints performance figures beside baselines
# measured in the same run.

GO        ?= go
TOOLS_BIN := $(CURDIR)/.tools/bin
FUZZTIME  ?= 5s
# Packages whose tests run under the race detector: everything with
# goroutines. The engine runs without it in the main pass (its suites are
# large) and gets its own -race pass over the concurrency tests.
export PATH := $(TOOLS_BIN):$(PATH)

.PHONY: run test vet fmt-check unit e2e-full fuzz tools bench build image crashloop clean test-timeshift conformance-peers

# The demo runs the built binary, not `go run` (which exits 1 when its
# child is interrupted). On a terminal it runs as a foreground job of its
# own (bash job control), so Ctrl-C reaches the archiver alone, which
# prints its summary and exits 0, and make, not interrupted, exits 0 too
# instead of 130.
run:
	@echo "building bin/archiver (the first build takes a few minutes, later ones seconds)..."
	@$(BUILD_ARCHIVER)
	@if [ -t 0 ] && command -v bash >/dev/null; then \
	  bash -c 'set -m; "$$@" & fg %1 >/dev/null' run bin/archiver demo; \
	else exec bin/archiver demo; fi

# `make build` writes bin/archiver and bin/archiver-engine, the engine
# alone (the same flags as `archiver engine`, in about half the memory).
GO_BUILD = CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-X main.version=$$(git describe --always --dirty 2>/dev/null)"
BUILD_ARCHIVER = $(GO_BUILD) -o bin/archiver ./cmd/archiver
build:
	$(BUILD_ARCHIVER)
	$(GO_BUILD) -o bin/archiver-engine ./cmd/archiver-engine

# The container image without a Docker engine or a base image to pull:
# bin/archiver-image.tar, an OCI image archive for linux/amd64 and
# linux/arm64 (tools/mkimage; deploy/README.md says how to push it). Every
# time in it is the last commit's: one commit and Go version, one image.
# Its tag is the version stamped into the binary (git describe: v1.0.0 on
# a release tag), ttl-archiver:VERSION, never latest.
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64
image:
	v="$$(git describe --always --dirty 2>/dev/null || echo dev)"; \
	cd tools/mkimage && SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct 2>/dev/null || echo 0) \
	  $(GO) run . -src $(CURDIR) -o $(CURDIR)/bin/archiver-image.tar -platforms $(IMAGE_PLATFORMS) \
	  -version "$$v" -name "ttl-archiver:$$v"

test: fmt-check vet tools unit e2e-full fuzz

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

# Race detector on every package: the consumer, shard walker, sinks and
# lease store are all concurrent, and so is the engine's sweeper.
unit:
	$(GO) test -race -count=1 -timeout 12m ./...
	cd tools/mkimage && $(GO) vet . && $(GO) test -race -count=1 .
	cd tools/cecheck && $(GO) vet . && $(GO) test -race -count=1 .

# The race detector makes the end-to-end pipeline test scale down to 5,000
# items; this runs it at the issue's full 50,000 without -race.
e2e-full:
	$(GO) test -count=1 -run 'TestPipelineS3AndJetStream' ./e2e/

# Every Fuzz target in the module, briefly: finds regressions in the parsers
# without making CI slow. Longer runs: make fuzz FUZZTIME=10m
fuzz:
	@bash .ci/fuzz.sh $(FUZZTIME)

# Test-only servers built from pinned versions in tools/go.mod (no Docker
# here): versitygw is the real S3-compatible server the S3 tests start.
tools:
	@bash .ci/tools.sh $(TOOLS_BIN)

# One section alone: make bench ONLY=manifests (or pipeline, sinks, ...:
# go run ./cmd/bench -h lists them). TINY=1 runs each section once at a tiny
# size (-tiny: the figures mean nothing; it checks that the bench runs, as
# cmd/bench's TestSectionsTiny does in make test).
bench: tools
	$(GO) run ./cmd/bench $(if $(ONLY),-only $(ONLY)) $(if $(TINY),-tiny)

# The conformance suite (docs/CONFORMANCE.md) against this engine, moto,
# dynalite and Dynoxide, installed from pip and npm under .tools/; rewrites
# the table in docs/CONFORMANCE.md. Not in `make test` (the engine's own
# runs are, in ./conformance): about 20 minutes, or 5 with
# CONFORMANCE_SLOW=0 (no real-time iterator expiry).
conformance-peers:
	@bash tools/conformance-peers.sh

# The crash loop of issue 5 at full length: `archiver run` as a real process,
# killed with SIGKILL 20 times while items keep expiring; every expired key
# must reach the sink. `make test` runs it with fewer rounds.
crashloop:
	CRASHLOOP_ROUNDS=20 $(GO) test -run TestCrashLoop -count=1 -v -timeout 20m ./e2e/

# The suite with every clock DAYS days ahead (time.Now overlaid in the tests,
# the binaries they build and versitygw): finds tests whose outcome depends
# on today's date. Not in `make test`: it rebuilds the standard library.
DAYS ?= 400
test-timeshift:
	@bash .ci/timeshift.sh $(DAYS)

clean:
	rm -rf bin .tools
