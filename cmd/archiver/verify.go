package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/archive"
	"github.com/ttl-archiver/archiver/cmd/internal/cli"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/logging"
	"github.com/ttl-archiver/archiver/internal/progress"
	"github.com/ttl-archiver/archiver/internal/redact"
	"github.com/ttl-archiver/archiver/manifest"
	"github.com/ttl-archiver/archiver/shard"
	"github.com/ttl-archiver/archiver/sinks"
)

// verifyConfig is the effective configuration of `archiver verify`.
type verifyConfig struct {
	From               string
	Table              string
	Since, Until       time.Time
	Kinds              []event.Kind
	JSON               bool
	SkipStream         bool
	WholeChains        bool
	StreamTimeout      time.Duration
	Grace              time.Duration
	Parallel           int
	MaxBufferBytes     int64
	sinceRaw, untilRaw string
	kindsRaw           []string
	maxBufferRaw       string
	shared             runConfig // endpoint, region, expired-when, log-level, config, print-config
	source             map[string]string
}

// verifyCommand is `archiver verify`'s configuration.
var verifyCommand = command[verifyConfig]{
	name: "verify", options: verifyOptions, validate: validateVerifyOption, check: validateVerify,
}

var verifyOptions = []option[verifyConfig]{
	{name: "from", typ: "url", secret: true, usage: "the archive: the URL of the sink that wrote it, s3://BUCKET/PREFIX[?endpoint=&region=&path-style=true] or file://DIR (required)",
		get: func(c *verifyConfig) any { return c.From }, set: func(c *verifyConfig, s string, _ []string, _ time.Duration) { c.From = s }},
	{name: "table", usage: "read only this table's objects; also cross-check its stream's REMOVE records still in the 24 h window against the archive (see --skip-stream)",
		get: func(c *verifyConfig) any { return c.Table }, set: func(c *verifyConfig, s string, _ []string, _ time.Duration) { c.Table = s }},
	{name: "since", typ: "time", usage: "only events deleted at or after: " + timeFlagUsage,
		get: func(c *verifyConfig) any { return c.sinceRaw }, set: func(c *verifyConfig, s string, _ []string, _ time.Duration) { c.sinceRaw = s }},
	{name: "until", typ: "time", usage: "only events deleted before; same forms as --since",
		get: func(c *verifyConfig) any { return c.untilRaw }, set: func(c *verifyConfig, s string, _ []string, _ time.Duration) { c.untilRaw = s }},
	{name: "kind", alias: "kinds", kind: kindList, def: "expired", usage: "with --table: the kinds the archive holds (the sink's events=): the stream's REMOVE records of these kinds are looked for in the archive (expired, deleted)",
		get: func(c *verifyConfig) any { return c.kindsRaw }, set: func(c *verifyConfig, s string, l []string, _ time.Duration) {
			c.kindsRaw = l
			if l == nil && s != "" {
				c.kindsRaw = splitList(s, false)
			}
		}},
	{name: "whole-chains", boolean: true, def: "false", usage: "with --since: still read every manifest, to check the chains of the shards before the window too (by default those are read at their last manifest only)",
		get: func(c *verifyConfig) any { return c.WholeChains }, set: func(c *verifyConfig, s string, _ []string, _ time.Duration) { c.WholeChains = s == "true" }},
	{name: "skip-stream", boolean: true, def: "false", usage: "with --table: do not read the table's stream",
		get: func(c *verifyConfig) any { return c.SkipStream }, set: func(c *verifyConfig, s string, _ []string, _ time.Duration) { c.SkipStream = s == "true" }},
	{name: "stream-timeout", kind: kindDuration, def: "5m", usage: "with --table: the longest the stream may take to be read to its end",
		get: func(c *verifyConfig) any { return c.StreamTimeout }, set: func(c *verifyConfig, _ string, _ []string, d time.Duration) { c.StreamTimeout = d }},
	{name: "grace", kind: kindDuration, def: "5m", usage: "with --table: stream records deleted this recently are pending, not missing (the archiver may not have flushed them yet: its S3 flush-interval, 60s by default, plus its reading lag); verify exits 1 when older ones are missing",
		get: func(c *verifyConfig) any { return c.Grace }, set: func(c *verifyConfig, _ string, _ []string, d time.Duration) { c.Grace = d }},
	{name: "json", boolean: true, def: "false", usage: "print the report as one JSON object instead of tables",
		get: func(c *verifyConfig) any { return c.JSON }, set: func(c *verifyConfig, s string, _ []string, _ time.Duration) { c.JSON = s == "true" }},
	{name: "parallel", kind: kindInt, def: "8", usage: "objects downloaded at once",
		get: func(c *verifyConfig) any { return c.Parallel }, set: func(c *verifyConfig, s string, _ []string, _ time.Duration) { c.Parallel, _ = strconv.Atoi(s) }},
	{name: "max-buffer-bytes", typ: "bytes", def: "64MiB", usage: "memory bound for downloaded objects not yet read (compressed bytes)",
		get: func(c *verifyConfig) any { return c.maxBufferRaw }, set: func(c *verifyConfig, s string, _ []string, _ time.Duration) { c.maxBufferRaw = s }},
	sharedRunOption[verifyConfig]("endpoint", "with --table: DynamoDB and DynamoDB Streams endpoint URL (default: AWS's endpoint for the region)", verifyShared),
	sharedRunOption[verifyConfig]("region", "", verifyShared),
	sharedRunOption[verifyConfig]("expired-when", "with --table: which REMOVE records are expiries, as archiver run was told: service or past-ttl", verifyShared),
	sharedRunOption[verifyConfig]("ttl-attribute", "with --table and --expired-when past-ttl: the table's TTL attribute, as archiver run was told (default: the one DescribeTimeToLive names)", verifyShared),
	sharedRunOption[verifyConfig]("log-level", "", verifyShared),
	sharedRunOption[verifyConfig]("config", "", verifyShared),
	sharedRunOption[verifyConfig]("print-config", "", verifyShared),
}

func verifyShared(c *verifyConfig) *runConfig { return &c.shared }

// validateVerifyOption checks one option's value.
func validateVerifyOption(c *verifyConfig, o option[verifyConfig], from string, p *cli.Problems) {
	var err error
	switch o.name {
	case "from":
		switch {
		case c.From == "":
			p.Add("%s: required: the archive, s3://BUCKET/PREFIX or file://DIR", from)
		case strings.HasPrefix(c.From, "s3://"):
			_, err = sinks.ParseS3URL(c.From)
		case strings.HasPrefix(c.From, "file://"):
			_, err = sinks.ParseFileURL(c.From)
		default:
			p.Add("%s: %q: want s3://BUCKET/PREFIX or file://DIR", from, redact.URL(c.From))
		}
		if err != nil {
			p.Add("%s: %v", from, err)
		}
	case "table":
		if c.Table != "" && event.ValidTableName(c.Table) != nil {
			p.Add("%s: table name %q must be 3-255 letters, digits, '_', '-' or '.'", from, c.Table)
		}
	case "since":
		if c.Since, err = parseTimeFlag(c.sinceRaw, time.Now()); err != nil {
			p.Add("%s: %v", from, err)
		}
	case "until":
		if c.Until, err = parseTimeFlag(c.untilRaw, time.Now()); err != nil {
			p.Add("%s: %v", from, err)
		}
	case "kind":
		c.Kinds = nil
		for _, s := range c.kindsRaw {
			k := event.Kind(s)
			if k != event.Expired && k != event.Deleted {
				p.Add("%s: %q: want expired or deleted (the kinds of REMOVE records)", from, s)
				continue
			}
			c.Kinds = append(c.Kinds, k)
		}
	case "stream-timeout":
		if c.StreamTimeout <= 0 {
			p.Add("%s: %s must be positive", from, c.StreamTimeout)
		}
	case "grace":
		if c.Grace < 0 {
			p.Add("%s: %s must not be negative", from, c.Grace)
		}
	case "parallel":
		if c.Parallel < 1 || c.Parallel > 256 {
			p.Add("%s: %d must be from 1 to 256", from, c.Parallel)
		}
	case "max-buffer-bytes":
		n, ok := sinks.ParseSize(c.maxBufferRaw)
		if !ok || n < 1 {
			p.Add("%s: %q is not a size like 64MiB", from, c.maxBufferRaw)
		}
		c.MaxBufferBytes = n
	case "skip-stream", "json", "whole-chains":
	default:
		validateOption(&c.shared, runOption(o.name), from, p)
	}
}

// validateVerify checks rules that involve several options.
func validateVerify(c *verifyConfig, p *cli.Problems) {
	if !c.Since.IsZero() && !c.Until.IsZero() && !c.Until.After(c.Since) {
		p.Add("--until %s must be after --since %s", c.untilRaw, c.sinceRaw)
	}
}

// loadVerifyConfig resolves `archiver verify`'s options like loadRunConfig.
func loadVerifyConfig(args []string, getenv func(string) string, stdout io.Writer) (*verifyConfig, error) {
	cfg := &verifyConfig{}
	src, err := loadConfig(verifyCommand, cfg, args, getenv, stdout)
	if err != nil {
		return nil, err
	}
	cfg.source = src
	return cfg, nil
}

// errUnreadable, errMissing and errIncomplete make verify exit 1 after
// its report.
var (
	errUnreadable = errors.New("the archive holds lines that do not decode")
	errMissing    = errors.New("the archive lacks stream records deleted before the grace period")
	errIncomplete = errors.New("the archive's coverage manifests do not prove it complete")
)

// verifyCmd is `archiver verify`: it reads the whole archive (or one
// table's part of it) and reports what is in it, what its coverage
// manifests prove of it and what is wrong with it; with --table, also
// the stream's REMOVE records missing from it. The report goes to stdout,
// progress and logs to stderr. It exits 1 when any line does not decode,
// when the manifests do not prove the archive complete (an archive
// without manifests has no coverage information, which is no failure by
// itself), or when the archive lacks a stream record deleted more than
// --grace before verify started.
func verifyCmd(ctx context.Context, args []string, e env) error {
	cfg, err := loadVerifyConfig(args, e.getenv, e.stdout)
	if err != nil {
		return err
	}
	if cfg.shared.PrintConfig {
		return printOptions(e.stdout, verifyCommand, cfg, cfg.source)
	}
	log, err := logging.New(e.stderr, cfg.shared.LogLevel, logging.FormatAuto)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	rep, err := runVerify(ctx, cfg, log, e.stderr)
	if err != nil {
		return err
	}
	if cfg.JSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep)
	} else {
		err = rep.print(e.stdout)
	}
	if err != nil {
		return err
	}
	var errs []error
	if rep.Undecodable > 0 {
		errs = append(errs, fmt.Errorf("%w: %d (listed above)", errUnreadable, rep.Undecodable))
	}
	if rep.Stream != nil && len(rep.Stream.Missing) > 0 {
		errs = append(errs, fmt.Errorf("%w (%s): %d (listed above)", errMissing, cfg.Grace, len(rep.Stream.Missing)))
	}
	if rep.Coverage.Verdict == archive.VerdictIncomplete {
		errs = append(errs, fmt.Errorf("%w: %d findings (listed above)", errIncomplete, rep.Coverage.FindingsTotal))
	}
	return errors.Join(errs...)
}

// runVerify reads the stream (with --table), the archive's manifests and
// then the archive, and builds the report.
func runVerify(ctx context.Context, cfg *verifyConfig, log *zap.Logger, stderr io.Writer) (*verifyReport, error) {
	log = log.Named("verify")
	var inStream map[string]archive.StreamRemove
	started := time.Now()
	if cfg.Table != "" && !cfg.SkipStream {
		var err error
		if inStream, err = readStream(ctx, cfg, log); err != nil {
			return nil, err
		}
	}
	sel := archive.Selection{Since: cfg.Since, Until: cfg.Until}
	if cfg.Table != "" {
		sel.Tables = []string{cfg.Table}
	}
	check := archive.NewMissingCheck(cfg.Table, inStream, started.Add(-cfg.Grace))
	v := archive.NewVerifier()
	cov := archive.NewCoverage(sel)
	if cfg.WholeChains {
		cov.WholeChains()
	}
	opts := archive.Options{Logger: log, Parallel: cfg.Parallel, MaxBufferBytes: cfg.MaxBufferBytes, SkipImages: true}
	a, err := archive.Open(ctx, cfg.From, cov.Hook(check.Hook(v.Hook(opts))))
	if err != nil {
		return nil, err
	}
	if err := cov.Load(ctx, a); err != nil {
		return nil, err
	}
	torn, err := a.TornTails(ctx)
	if err != nil {
		return nil, err
	}
	tornTotal := len(torn)
	torn = append([]archive.TornTail{}, torn[:min(len(torn), archive.MaxListed)]...)
	f, tty := stderr.(*os.File)
	rp := progress.New(progress.Options{Label: "verify", Out: stderr, TTY: tty && logging.IsTerminal(f), Logger: log,
		Objects: func() (int64, int64) { p := a.Progress(); return p.ObjectsDone, p.ObjectsTotal }})
	stop := rp.Start(ctx)
	st, err := a.Events(ctx, sel, func(l archive.Line) error {
		v.Event(&l.Event) // check and cov see every line, through their Hooks
		rp.AddItems(1)
		return nil
	})
	stop()
	if err != nil {
		return nil, err
	}
	rep := &verifyReport{Report: *v.Finish(a.URL(), st), Coverage: cov.Finish(), Stream: check.Result(),
		TornTails: torn, TornTailsTotal: tornTotal}
	gapRecords(rep.Coverage, inStream, check)
	return rep, nil
}

// gapRecords gives each gap of the coverage the stream's REMOVE records
// in it (verify --table, while the stream still holds them): what the
// archive should hold there, and whether it does all the same.
func gapRecords(cov *archive.CoverageReport, inStream map[string]archive.StreamRemove, check *archive.MissingCheck) {
	for i := range cov.Findings {
		f := &cov.Findings[i]
		if f.Kind != manifest.FindGap {
			continue
		}
		for _, r := range inStream {
			if f.Holds(&r) {
				f.InStream = append(f.InStream, archive.GapRecord{StreamRemove: r, Archived: check.Archived(r.EventID)})
			}
		}
		slices.SortFunc(f.InStream, func(a, b archive.GapRecord) int { return event.CompareSequence(a.Sequence, b.Sequence) })
	}
}

// readStream opens the DynamoDB and Streams clients and reads the table's
// stream (see archive.StreamRemoves).
func readStream(ctx context.Context, cfg *verifyConfig, log *zap.Logger) (map[string]archive.StreamRemove, error) {
	awsCfg, err := loadAWSConfig(ctx, "verify", cfg.shared.Region, cfg.shared.Endpoint, log)
	if err != nil {
		return nil, err
	}
	ddb, st := endpointClients(awsCfg, cfg.shared.Endpoint)
	_, err = shard.CheckTables(ctx, shard.SourceCheck{Tables: ddb, TableNames: []string{cfg.Table}, Endpoint: cfg.shared.Endpoint, Region: awsCfg.Region,
		RequireStream: true, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("--table: %w (--skip-stream reads the archive only)", err)
	}
	when, err := event.ParseExpiredWhen(cfg.shared.ExpiredWhen)
	if err != nil {
		return nil, err
	}
	return archive.StreamRemoves(ctx, archive.StreamCheck{Tables: ddb, Streams: st, Table: cfg.Table,
		Kinds: cfg.Kinds, ExpiredWhen: when, TTLAttribute: cfg.shared.TTLAttribute,
		Since: cfg.Since, Until: cfg.Until, Timeout: cfg.StreamTimeout, Logger: log})
}
