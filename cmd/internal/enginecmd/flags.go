package enginecmd

import (
	"flag"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/ttl-archiver/archiver/cmd/internal/cli"
	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/internal/logging"
)

// flags are the engine command's flags as parsed, before their checks.
type flags struct {
	fs                             *flag.FlagSet
	listen, rollover, region       string
	logLevel, controlFrom, dataDir string
	ttlInterval                    ttlIntervalFlag
	ttlLag, retention              time.Duration
	bodyTimeout, idleTimeout       time.Duration
	shards, maxConns               int
	memHeadroom                    float64
	manualClock, ui                bool
	allowHosts                     []string
}

// newFlags defines the flags on a FlagSet named prog (its name starts the
// messages of a mistyped flag), in the order help lists them.
func newFlags(prog string) *flags {
	f := &flags{fs: flag.NewFlagSet(prog, flag.ContinueOnError), ttlInterval: ttlIntervalFlag(time.Second)}
	fs := f.fs
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8000", "address to serve DynamoDB and DynamoDB Streams on (loopback by default)")
	fs.Var(&f.ttlInterval, "ttl-interval", "pause between TTL sweeps, e.g. 1s or 500ms; -1 (or any negative duration): no sweeper")
	fs.DurationVar(&f.ttlLag, "ttl-lag", 0, "delay each expired item's deletion by a random 0..D, as production does")
	fs.IntVar(&f.shards, "stream-shards", 1, "open shards per stream")
	fs.StringVar(&f.rollover, "shard-rollover", "4h", "close each shard and open its child after this age (e.g. 4h) or record count (e.g. 500); 0 = never")
	fs.DurationVar(&f.retention, "stream-retention", 24*time.Hour, "stream records older than this are trimmed")
	fs.StringVar(&f.region, "region", "us-east-1", "default Region: of requests whose SigV4 credential scope names none (each request is in its scope's Region; every Region is served)")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.BoolVar(&f.manualClock, "manual-clock", false, "start the engine's clock at the wall clock and move it only through POST /_engine/clock")
	fs.StringVar(&f.controlFrom, "control-from", "", "comma-separated CIDRs of non-loopback clients allowed to use the /_engine/ control API (loopback always is)")
	fs.StringVar(&f.dataDir, "data-dir", "", "keep tables, items and streams in this directory across restarts and crashes (empty: in memory only)")
	fs.Func("allow-host", "host `NAME`s a request's Host may name besides localhost, loopback addresses and the engine's own address (repeatable, comma-separated; * for any): docker-compose service names, host.docker.internal", func(v string) error {
		f.allowHosts = append(f.allowHosts, v)
		return nil
	})
	fs.IntVar(&f.maxConns, "max-conns", 1024, "open connections at most; beyond it the one waiting longest for a request is closed, or the new one waits if all are busy")
	fs.DurationVar(&f.bodyTimeout, "body-timeout", time.Minute, "time to receive one request body from the end of its headers, whatever length it announces; slower ones are answered 408 and their connection closed")
	fs.DurationVar(&f.idleTimeout, "idle-timeout", 2*time.Minute, "close a keep-alive connection idle this long")
	fs.Float64Var(&f.memHeadroom, "memory-headroom", 0, "let the heap grow this fraction beyond the live heap before the collector runs (at least 4 MiB; never later than Go's default): 0.125 holds 100,000 items in about 40 MiB instead of 70 at about 1.4x the CPU per write (docs/DESIGN.md, \"The engine\", Item memory); 0 keeps Go's default (GOGC)")
	fs.BoolVar(&f.ui, "ui", true, "serve the web console at /_engine/ui/ (tables, items, streams, the clock) to the clients the control API admits; on by default only when --listen is loopback: --ui=false turns it off, --ui=true turns it on beyond loopback")
	return f
}

// options checks the flags, reporting every problem at once as one
// *cli.UsageError, and returns the engine's options (without a logger).
func (f *flags) options() (engine.Options, error) {
	var probs cli.Problems
	if _, _, err := net.SplitHostPort(f.listen); err != nil {
		probs.Add("--listen: %q is not HOST:PORT (e.g. 127.0.0.1:8000)", f.listen)
	}
	if f.ttlLag < 0 {
		probs.Add("--ttl-lag: %s must not be negative", f.ttlLag)
	}
	if f.shards < 1 || f.shards > 1000 {
		probs.Add("--stream-shards: %d must be from 1 to 1000", f.shards)
	}
	rollAge, rollRecords, err := engine.ParseRollover(f.rollover)
	if err != nil {
		probs.Add("--shard-rollover: %v", err)
	}
	if f.retention <= 0 {
		probs.Add("--stream-retention: %s must be positive", f.retention)
	}
	// The engine's own rule, not the archiver's stricter one: the engine
	// serves any well-formed name (local too), as its requests' scopes.
	if !engine.ValidRegion(f.region) {
		probs.Add("--region: %q is not a Region name: 1 to 63 lower-case letters, digits and hyphens, like us-east-1 or local", f.region)
	}
	if _, err := logging.ParseLevel(f.logLevel); err != nil {
		probs.Add("--log-level: %v", err)
	}
	ctlFrom, err := parseCIDRs(f.controlFrom)
	if err != nil {
		probs.Add("--control-from: %v", err)
	}
	hosts := f.connectionProblems(&probs)
	if err := probs.Err(f.fs.Name()); err != nil {
		return engine.Options{}, err
	}
	var clock engine.Clock
	if f.manualClock {
		clock = engine.NewManualClock(time.Now())
	}
	return engine.Options{Region: f.region, TTLInterval: time.Duration(f.ttlInterval), TTLLag: f.ttlLag,
		StreamShards: f.shards, ShardRollover: rollAge, ShardRolloverRecords: rollRecords, StreamRetention: f.retention,
		Clock: clock, ControlFrom: ctlFrom, DataDir: f.dataDir, AllowHosts: hosts, MaxConns: f.maxConns,
		BodyTimeout: f.bodyTimeout, IdleTimeout: f.idleTimeout, UI: consoleOn(f.fs, f.ui, f.listen)}, nil
}

// connectionProblems checks the flags of connections and memory
// (--allow-host, --max-conns, the timeouts, --memory-headroom) and
// returns the hosts --allow-host names.
func (f *flags) connectionProblems(probs *cli.Problems) []string {
	var hosts []string
	for _, v := range f.allowHosts {
		h, err := engine.ParseAllowHosts(v)
		if err != nil {
			probs.Add("--allow-host: %v", err)
		}
		hosts = append(hosts, h...)
	}
	if f.maxConns < 1 {
		probs.Add("--max-conns: %d must be at least 1", f.maxConns)
	}
	if f.bodyTimeout <= 0 {
		probs.Add("--body-timeout: %s must be positive", f.bodyTimeout)
	}
	if f.idleTimeout <= 0 {
		probs.Add("--idle-timeout: %s must be positive", f.idleTimeout)
	}
	if f.memHeadroom < 0 || f.memHeadroom > 10 {
		probs.Add("--memory-headroom %v: want 0 (off) to 10", f.memHeadroom)
	}
	return hosts
}

// ttlIntervalFlag is --ttl-interval: a Go duration, or -1 for no sweeper
// (a unit-less -1 is what the engine's Go option reads as off, so the flag
// takes it too); other numbers without a unit are refused, naming the
// forms it takes.
type ttlIntervalFlag time.Duration

func (f *ttlIntervalFlag) String() string { return time.Duration(*f).String() }

// Type names the value in help: "-ttl-interval duration".
func (f *ttlIntervalFlag) Type() string { return "duration" }

func (f *ttlIntervalFlag) Set(s string) error {
	if strings.TrimSpace(s) == "-1" {
		*f = ttlIntervalFlag(-time.Second)
		return nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		if _, nerr := strconv.ParseFloat(strings.TrimSpace(s), 64); nerr == nil {
			return fmt.Errorf("%q has no unit: want a duration like 1s or 500ms, or -1 for no sweeper", s)
		}
		return fmt.Errorf("%q: want a duration like 1s or 500ms, or -1 for no sweeper", s)
	}
	*f = ttlIntervalFlag(d)
	return nil
}

// parseCIDRs parses the --control-from flag: comma-separated CIDRs such as
// "10.0.0.0/8,fd00::/8" ("" is none). A bare address is a one-address
// network.
func parseCIDRs(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !strings.Contains(f, "/") {
			a, err := netip.ParseAddr(f)
			if err != nil {
				return nil, fmt.Errorf("%q is not a CIDR like 10.0.0.0/8 or an IP address", f)
			}
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR like 10.0.0.0/8 or fd00::/8", f)
		}
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), max(p.Bits()-96, 0))
		}
		out = append(out, p.Masked())
	}
	return out, nil
}
