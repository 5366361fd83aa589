package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/cmd/internal/cli"
	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/internal/logging"
)

// engineCmd serves the local DynamoDB + Streams engine until ctx ends
// (SIGINT/SIGTERM), then shuts it down cleanly.
func engineCmd(ctx context.Context, args []string, e env) error {
	args, cpuProfile, err := cli.TakeHiddenFlag(args, "cpuprofile")
	if err != nil {
		return cli.Usagef("archiver engine: %v", err)
	}
	fs := flag.NewFlagSet("archiver engine", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:8000", "address to serve DynamoDB and DynamoDB Streams on (loopback by default)")
	ttlInterval := ttlIntervalFlag(time.Second)
	fs.Var(&ttlInterval, "ttl-interval", "pause between TTL sweeps, e.g. 1s or 500ms; -1 (or any negative duration): no sweeper")
	ttlLag := fs.Duration("ttl-lag", 0, "delay each expired item's deletion by a random 0..D, as production does")
	shards := fs.Int("stream-shards", 1, "open shards per stream")
	rollover := fs.String("shard-rollover", "4h", "close each shard and open its child after this age (e.g. 4h) or record count (e.g. 500); 0 = never")
	retention := fs.Duration("stream-retention", 24*time.Hour, "stream records older than this are trimmed")
	region := fs.String("region", "us-east-1", "default Region: of requests whose SigV4 credential scope names none (each request is in its scope's Region; every Region is served)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	manualClock := fs.Bool("manual-clock", false, "start the engine's clock at the wall clock and move it only through POST /_engine/clock")
	controlFrom := fs.String("control-from", "", "comma-separated CIDRs of non-loopback clients allowed to use the /_engine/ control API (loopback always is)")
	dataDir := fs.String("data-dir", "", "keep tables, items and streams in this directory across restarts and crashes (empty: in memory only)")
	var allowHosts []string
	fs.Func("allow-host", "host `NAME`s a request's Host may name besides localhost, loopback addresses and the engine's own address (repeatable, comma-separated; * for any): docker-compose service names, host.docker.internal", func(v string) error {
		allowHosts = append(allowHosts, v)
		return nil
	})
	maxConns := fs.Int("max-conns", 1024, "open connections at most; beyond it the one waiting longest for a request is closed, or the new one waits if all are busy")
	bodyTimeout := fs.Duration("body-timeout", time.Minute, "time to receive one request body from the end of its headers, whatever length it announces; slower ones are answered 408 and their connection closed")
	idleTimeout := fs.Duration("idle-timeout", 2*time.Minute, "close a keep-alive connection idle this long")
	memHeadroom := fs.Float64("memory-headroom", 0, "let the heap grow this fraction beyond the live heap before the collector runs (at least 4 MiB; never later than Go's default): 0.125 holds 100,000 items in about 40 MiB instead of 70 at about 1.4x the CPU per write (docs/DESIGN.md, \"The engine\", Item memory); 0 keeps Go's default (GOGC)")
	uiFlag := fs.Bool("ui", true, "serve the web console at /_engine/ui/ (tables, items, streams, the clock) to the clients the control API admits; on by default only when --listen is loopback: --ui=false turns it off, --ui=true turns it on beyond loopback")
	if err := cli.ParseFlags(fs, args, e.stdout, "usage: archiver engine [flags]\n\nflags:"+"\n"); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("archiver engine: unexpected argument %q", fs.Arg(0))
	}
	var probs cli.Problems
	if _, _, err := net.SplitHostPort(*listen); err != nil {
		probs.Add("--listen: %q is not HOST:PORT (e.g. 127.0.0.1:8000)", *listen)
	}
	if *ttlLag < 0 {
		probs.Add("--ttl-lag: %s must not be negative", *ttlLag)
	}
	if *shards < 1 || *shards > 1000 {
		probs.Add("--stream-shards: %d must be from 1 to 1000", *shards)
	}
	rollAge, rollRecords, err := engine.ParseRollover(*rollover)
	if err != nil {
		probs.Add("--shard-rollover: %v", err)
	}
	if *retention <= 0 {
		probs.Add("--stream-retention: %s must be positive", *retention)
	}
	if !regionRE.MatchString(*region) {
		probs.Add("--region: %q is not a region name like us-east-1", *region)
	}
	if _, err := logging.ParseLevel(*logLevel); err != nil {
		probs.Add("--log-level: %v", err)
	}
	ctlFrom, err := parseCIDRs(*controlFrom)
	if err != nil {
		probs.Add("--control-from: %v", err)
	}
	var hosts []string
	for _, v := range allowHosts {
		h, err := engine.ParseAllowHosts(v)
		if err != nil {
			probs.Add("--allow-host: %v", err)
		}
		hosts = append(hosts, h...)
	}
	if *maxConns < 1 {
		probs.Add("--max-conns: %d must be at least 1", *maxConns)
	}
	if *bodyTimeout <= 0 {
		probs.Add("--body-timeout: %s must be positive", *bodyTimeout)
	}
	if *idleTimeout <= 0 {
		probs.Add("--idle-timeout: %s must be positive", *idleTimeout)
	}
	if err := probs.Err("archiver engine"); err != nil {
		return err
	}
	log, err := logging.New(e.stdout, *logLevel, logging.FormatAuto)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	log = log.Named("engine")
	stopProfile, err := cli.StartCPUProfile(cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	if *memHeadroom < 0 || *memHeadroom > 10 {
		return cli.Usagef("archiver engine: --memory-headroom %v: want 0 (off) to 10", *memHeadroom)
	}
	defer engine.TuneMemory(engine.MemoryTuning{Headroom: *memHeadroom, Floor: 4 << 20})()
	var clock engine.Clock
	if *manualClock {
		clock = engine.NewManualClock(time.Now())
	}
	srv, err := engine.Listen(*listen, engine.Options{
		Region:               *region,
		TTLInterval:          time.Duration(ttlInterval),
		TTLLag:               *ttlLag,
		StreamShards:         *shards,
		ShardRollover:        rollAge,
		ShardRolloverRecords: rollRecords,
		StreamRetention:      *retention,
		Logger:               log,
		Clock:                clock,
		ControlFrom:          ctlFrom,
		DataDir:              *dataDir,
		AllowHosts:           hosts,
		MaxConns:             *maxConns,
		BodyTimeout:          *bodyTimeout,
		IdleTimeout:          *idleTimeout,
		UI:                   consoleOn(fs, *uiFlag, *listen),
	})
	if err != nil {
		return err // names the address, or the data directory and what is wrong with it
	}
	if consoleOn(fs, *uiFlag, *listen) {
		log.Info("web console", zap.String("url", srv.Endpoint()+"/_engine/ui/"))
	}
	if host, _, _ := net.SplitHostPort(*listen); !isLoopbackHost(host) {
		log.Warn("engine listening beyond loopback: it accepts any credentials, and checks a request's Host only with --allow-host", zap.String("listen", *listen))
	}
	<-ctx.Done()
	log.Info("shutting down", zap.String("endpoint", srv.Endpoint()))
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
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

// isLoopbackHost reports whether host (a name or an IP, from a URL or a
// listen address) is this machine's loopback.
func isLoopbackHost(host string) bool {
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// consoleOn is whether the engine serves its web console: --ui as given,
// or by default (flag not given) only when it listens on loopback.
func consoleOn(fs *flag.FlagSet, ui bool, listen string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "ui" })
	host, _, _ := net.SplitHostPort(listen)
	return ui && (given || isLoopbackHost(host))
}
