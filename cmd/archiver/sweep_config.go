package main

import (
	"io"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/ttl-archiver/archiver/cmd/internal/cli"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/sweep"
)

// sweepConfig is the effective configuration of `archiver sweep`.
type sweepConfig struct {
	Table               string
	Index               string
	WindowAttribute     string
	TTLAttribute        string
	TTLOverride         bool
	Window              time.Duration
	WindowShards        int
	Interval            time.Duration
	Grace, Lookback     time.Duration
	MaxDeletesPerSecond int
	MaxClockSkew        time.Duration

	// shared holds the settings sweep takes from `archiver run` (endpoint,
	// region, checkpoint, worker ID, leases, shutdown, logs, metrics,
	// config): the same options, checks and store opening.
	shared runConfig
	// source says where each option's value came from (see runConfig).
	source map[string]string
}

// sweepCommand is `archiver sweep`'s configuration.
var sweepCommand = command[sweepConfig]{
	name: "sweep", options: sweepOptions, validate: validateSweepOption, check: validateSweep,
}

var sweepOptions = []option[sweepConfig]{
	fromRun("endpoint", "DynamoDB endpoint URL (default: AWS's endpoint for the region)"),
	fromRun("region", ""),
	{name: "table", usage: "the table to sweep (required; one per process)",
		get: func(c *sweepConfig) any { return c.Table }, set: func(c *sweepConfig, s string, _ []string, _ time.Duration) { c.Table = s }},
	{name: "index", def: sweep.DefaultIndex, usage: "global secondary index whose hash key is the window attribute (and range key the TTL attribute)",
		get: func(c *sweepConfig) any { return c.Index }, set: func(c *sweepConfig, s string, _ []string, _ time.Duration) { c.Index = s }},
	{name: "window-attribute", def: sweep.DefaultWindowAttribute, usage: "attribute naming the item's window, e.g. 2022-07-19T21:27:00.000Z_2022-07-19T21:28:00.000Z (with --window-shards, followed by #k)",
		get: func(c *sweepConfig) any { return c.WindowAttribute }, set: func(c *sweepConfig, s string, _ []string, _ time.Duration) { c.WindowAttribute = s }},
	{name: "window", kind: kindDuration, def: "1m", usage: "length of the windows the writers use (a whole number of milliseconds)",
		get: func(c *sweepConfig) any { return c.Window }, set: func(c *sweepConfig, _ string, _ []string, d time.Duration) { c.Window = d }},
	{name: "window-shards", kind: kindInt, def: "1", usage: "index partitions one window is spread over (<window>#0 ... #N-1), as the writers do",
		get: func(c *sweepConfig) any { return c.WindowShards }, set: func(c *sweepConfig, s string, _ []string, _ time.Duration) { c.WindowShards, _ = strconv.Atoi(s) }},
	{name: "ttl-attribute", usage: "the TTL attribute (default: the one DescribeTimeToLive names); for a table whose DynamoDB TTL is off: one whose TTL is enabled on another attribute is refused unless --ttl-attribute-override",
		get: func(c *sweepConfig) any { return c.TTLAttribute }, set: func(c *sweepConfig, s string, _ []string, _ time.Duration) { c.TTLAttribute = s }},
	{name: "ttl-attribute-override", boolean: true, def: "false", usage: "sweep on --ttl-attribute even though the table's DynamoDB TTL is enabled on another attribute (deletes items DynamoDB's TTL does not consider expired)",
		get: func(c *sweepConfig) any { return c.TTLOverride }, set: func(c *sweepConfig, s string, _ []string, _ time.Duration) { c.TTLOverride = s == "true" }},
	{name: "max-clock-skew", kind: kindDuration, def: "1s", usage: "pause deletes while this clock and DynamoDB's (the Date header of its responses) disagree by more than this; 0: no check",
		get: func(c *sweepConfig) any { return c.MaxClockSkew }, set: func(c *sweepConfig, _ string, _ []string, d time.Duration) { c.MaxClockSkew = d }},
	{name: "interval", kind: kindDuration, def: "1s", usage: "pause between the starts of two passes",
		get: func(c *sweepConfig) any { return c.Interval }, set: func(c *sweepConfig, _ string, _ []string, d time.Duration) { c.Interval = d }},
	{name: "grace", kind: kindDuration, def: "0s", usage: "how long after its end a window is read whole and left behind by the cursor (0: one --window); items written with a TTL older than that are left to DynamoDB's TTL",
		get: func(c *sweepConfig) any { return c.Grace }, set: func(c *sweepConfig, _ string, _ []string, d time.Duration) { c.Grace = d }},
	{name: "lookback", kind: kindDuration, def: "1h", usage: "where a sweeper with no stored cursor starts: this long before now",
		get: func(c *sweepConfig) any { return c.Lookback }, set: func(c *sweepConfig, _ string, _ []string, d time.Duration) { c.Lookback = d }},
	{name: "max-deletes-per-second", kind: kindInt, def: "0", usage: "cap on the sweeper's write requests per second (deletes and re-files, retries included); 0: no cap",
		get: func(c *sweepConfig) any { return c.MaxDeletesPerSecond }, set: func(c *sweepConfig, s string, _ []string, _ time.Duration) {
			c.MaxDeletesPerSecond, _ = strconv.Atoi(s)
		}},
	fromRun("checkpoint", "where the sweep cursor is kept, and the lock that lets one process at a time sweep the table: file://PATH (one process) or dynamodb://TABLE[?endpoint=&region=&create=true] (several tasks: the same lease table as archiver run)"),
	fromRun("checkpoint-namespace", "with dynamodb:// checkpoints: keep this deployment's sweeper locks and cursors apart from other deployments sharing the lease table (1 to 32 letters, digits, '_' or '-'; the same as the deployment's archiver run gives); default: none, the keys as before"),
	fromRun("worker-id", ""),
	fromRun("lease-duration", "with dynamodb:// checkpoints: how long the sweeper's lease stays valid without renewal (a killed sweeper's table is swept again after at most this)"),
	fromRun("lease-renew", ""),
	fromRun("shutdown-timeout", "on SIGTERM, time to stop sweeping, save the cursor and release the lease (keep it under ECS's stopTimeout)"),
	fromRun("log-level", ""),
	fromRun("metrics-addr", ""),
	fromRun("metrics", ""),
	fromRun("pprof", ""),
	fromRun("config", ""),
	fromRun("print-config", ""),
}

// fromRun is run's option of that name for sweep, on sweepConfig.shared;
// usage, when set, replaces run's text.
func fromRun(name, usage string) option[sweepConfig] {
	return sharedRunOption(name, usage, func(c *sweepConfig) *runConfig { return &c.shared })
}

// runOption is run's option of that name; it panics (at start-up, in every
// test) when there is none.
func runOption(name string) option[runConfig] {
	for _, o := range runOptions {
		if o.name == name {
			return o
		}
	}
	panic("archiver: archiver run has no option " + name)
}

// validAttrName reports whether name can be a DynamoDB key or TTL
// attribute's name: 1 to 255 bytes of UTF-8 (bytes, as DynamoDB counts:
// 255 characters of Japanese are 765 bytes).
func validAttrName(name string) bool {
	return len(name) >= 1 && len(name) <= 255 && utf8.ValidString(name)
}

// attrNameProblem says what validAttrName wants.
const attrNameProblem = "is not an attribute name (1 to 255 bytes of UTF-8)"

// validateSweepOption checks one option's value; the options shared with
// run are checked as run checks them.
func validateSweepOption(c *sweepConfig, o option[sweepConfig], from string, p *cli.Problems) {
	switch o.name {
	case "table":
		if c.Table == "" {
			p.Add("%s: required: the table to sweep", from)
		} else if event.ValidTableName(c.Table) != nil {
			p.Add("%s: table name %q must be 3-255 letters, digits, '_', '-' or '.'", from, c.Table)
		}
	case "index":
		if event.ValidTableName(c.Index) != nil {
			p.Add("%s: index name %q must be 3-255 letters, digits, '_', '-' or '.'", from, c.Index)
		}
	case "window-attribute":
		if !validAttrName(c.WindowAttribute) {
			p.Add("%s: %q %s", from, c.WindowAttribute, attrNameProblem)
		}
	case "ttl-attribute":
		if c.TTLAttribute != "" && !validAttrName(c.TTLAttribute) {
			p.Add("%s: %q %s", from, c.TTLAttribute, attrNameProblem)
		}
	case "window":
		if c.Window < time.Millisecond || c.Window%time.Millisecond != 0 {
			p.Add("%s: %s must be a positive whole number of milliseconds (e.g. 1m)", from, c.Window)
		}
	case "window-shards":
		if c.WindowShards < 1 || c.WindowShards > 1000 {
			p.Add("%s: %d must be from 1 to 1000", from, c.WindowShards)
		}
	case "interval":
		if c.Interval <= 0 {
			p.Add("%s: %s must be positive", from, c.Interval)
		}
	case "grace":
		if c.Grace < 0 {
			p.Add("%s: %s must not be negative", from, c.Grace)
		}
	case "lookback":
		if c.Lookback <= 0 {
			p.Add("%s: %s must be positive", from, c.Lookback)
		}
	case "ttl-attribute-override":
	case "max-clock-skew":
		if c.MaxClockSkew < 0 {
			p.Add("%s: %s must not be negative (0: no check)", from, c.MaxClockSkew)
		}
	case "max-deletes-per-second":
		if c.MaxDeletesPerSecond < 0 {
			p.Add("%s: %d must be 0 (no cap) or positive", from, c.MaxDeletesPerSecond)
		}
	default:
		validateOption(&c.shared, runOption(o.name), from, p)
	}
}

// validateSweep checks rules that involve several options.
func validateSweep(c *sweepConfig, p *cli.Problems) {
	validateNamespace(&c.shared, p)
	validateLeaseTiming(&c.shared, p)
}

// loadSweepConfig resolves `archiver sweep`'s options like loadRunConfig.
func loadSweepConfig(args []string, getenv func(string) string, stdout io.Writer) (*sweepConfig, error) {
	cfg := &sweepConfig{}
	src, err := loadConfig(sweepCommand, cfg, args, getenv, stdout)
	if err != nil {
		return nil, err
	}
	cfg.source = src
	return cfg, nil
}
