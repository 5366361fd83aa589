package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/archive"
	"github.com/ttl-archiver/archiver/cmd/internal/cli"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/logging"
	"github.com/ttl-archiver/archiver/internal/progress"
	"github.com/ttl-archiver/archiver/restore"
	"github.com/ttl-archiver/archiver/shard"
)

// selectFlags are the options restore and replay share: where the archive
// is and which of its events to take.
type selectFlags struct {
	From   string
	Tables []string
	Kinds  []string
	Since  string
	Until  string
	Keys   []string
	Where  string
}

// selectOptions are the selection options on a command whose
// configuration is C; sel finds them in C.
func selectOptions[C any](sel func(*C) *selectFlags, tableUsage string) []option[C] {
	str := func(o option[C], f func(*selectFlags) *string) option[C] {
		o.get = func(c *C) any { return *f(sel(c)) }
		o.set = func(c *C, s string, _ []string, _ time.Duration) { *f(sel(c)) = s }
		return o
	}
	list := func(o option[C], f func(*selectFlags) *[]string) option[C] {
		o.get = func(c *C) any { return *f(sel(c)) }
		o.set = func(c *C, s string, l []string, _ time.Duration) {
			if l == nil && s != "" {
				l = splitList(s, false) // the default
			}
			*f(sel(c)) = l
		}
		return o
	}
	return []option[C]{
		str(option[C]{name: "from", typ: "url", secret: true, usage: "the archive: s3://BUCKET/PREFIX or file://DIR, with the parameters of the sink that wrote it (endpoint=, region=, path-style=) (required)"},
			func(s *selectFlags) *string { return &s.From }),
		list(option[C]{name: "table", alias: "tables", kind: kindList, usage: tableUsage},
			func(s *selectFlags) *[]string { return &s.Tables }),
		list(option[C]{name: "kind", alias: "kinds", kind: kindList, def: "expired", usage: "event kinds to take: expired, deleted, inserted, modified or all (repeatable)"},
			func(s *selectFlags) *[]string { return &s.Kinds }),
		str(option[C]{name: "since", typ: "time", usage: "only events deleted (made) at or after: " + timeFlagUsage},
			func(s *selectFlags) *string { return &s.Since }),
		str(option[C]{name: "until", typ: "time", usage: "only events deleted (made) before; same forms as --since"},
			func(s *selectFlags) *string { return &s.Until }),
		list(option[C]{name: "key", alias: "keys", kind: kindURLList, typ: "attr=value", usage: "ATTR=VALUE: only items whose ATTR equals VALUE (S by text, N as a decimal; S:, N: or B:base64 pin the type); repeatable: one attribute's values are alternatives, different attributes must all match"},
			func(s *selectFlags) *[]string { return &s.Keys }),
		str(option[C]{name: "where", typ: "expression", usage: "a DynamoDB condition expression on the archived item, values inline: \"price > 10 AND begins_with(sk, 'cart#')\" (comparisons, BETWEEN, IN, AND/OR/NOT, attribute_exists, attribute_not_exists, begins_with, contains, size, paths a.b[0], odd names in backquotes)"},
			func(s *selectFlags) *string { return &s.Where }),
	}
}

// validate checks one selection option; it reports whether o is one.
func (s *selectFlags) validate(name, from string, p *cli.Problems) bool {
	switch name {
	case "from":
		if s.From == "" {
			p.Add("%s: required: the archive, s3://BUCKET/PREFIX or file://DIR", from)
		} else if u, err := url.Parse(s.From); err != nil || (u.Scheme != "s3" && u.Scheme != "file") {
			p.Add("%s: want s3://BUCKET/PREFIX or file://DIR", from)
		} else if err := checkSinkURL(s.From); err != nil {
			p.Add("%s: %v", from, err)
		}
	case "table":
		for _, t := range s.Tables {
			if event.ValidTableName(t) != nil {
				p.Add("%s: table name %q must be 3-255 letters, digits, '_', '-' or '.'", from, t)
			}
		}
	case "kind":
		if _, err := restore.ParseKinds(s.Kinds); err != nil {
			p.Add("%s: %v", from, err)
		}
	case "since", "until":
		v := s.Since
		if name == "until" {
			v = s.Until
		}
		if _, err := parseTimeFlag(v, time.Now()); err != nil {
			p.Add("%s: %v", from, err)
		}
	case "key":
		for _, k := range s.Keys {
			if _, err := restore.ParseKey(k); err != nil {
				p.Add("%s: %v", from, err)
			}
		}
	case "where":
		if s.Where != "" {
			if _, err := restore.ParseWhere(s.Where); err != nil {
				p.Add("%s: %v", from, err)
			}
		}
	default:
		return false
	}
	return true
}

// selection builds the archive reader's selection and restore's.
func (s *selectFlags) selection(now time.Time) (archive.Selection, *restore.Selection, error) {
	kinds, err := restore.ParseKinds(s.Kinds)
	if err != nil {
		return archive.Selection{}, nil, fmt.Errorf("--kind: %w", err)
	}
	as := archive.Selection{Tables: s.Tables, Kinds: kinds}
	if as.Since, err = parseTimeFlag(s.Since, now); err != nil {
		return archive.Selection{}, nil, fmt.Errorf("--since: %w", err)
	}
	if as.Until, err = parseTimeFlag(s.Until, now); err != nil {
		return archive.Selection{}, nil, fmt.Errorf("--until: %w", err)
	}
	rs := &restore.Selection{}
	for _, k := range s.Keys {
		km, err := restore.ParseKey(k)
		if err != nil {
			return archive.Selection{}, nil, fmt.Errorf("--key: %w", err)
		}
		rs.Keys = append(rs.Keys, km)
	}
	if s.Where != "" {
		if rs.Where, err = restore.ParseWhere(s.Where); err != nil {
			return archive.Selection{}, nil, fmt.Errorf("--where: %w", err)
		}
	}
	return as, rs, nil
}

// restoreConfig is the effective configuration of `archiver restore`.
type restoreConfig struct {
	sel          selectFlags
	ToTable      string
	Overwrite    bool
	TTLExtend    time.Duration
	KeepTTL      bool
	RemoveTTL    bool
	TTLAttribute string
	DryRun       bool
	Rate         int
	Parallel     int
	Resume       string
	shared       runConfig // endpoint, region, log-level, config, print-config
	source       map[string]string
}

var restoreCommand = command[restoreConfig]{
	name: "restore", options: restoreOptions(), validate: validateRestoreOption, check: validateRestore,
}

func restoreOptions() []option[restoreConfig] {
	shared := func(name, usage string) option[restoreConfig] {
		return sharedRunOption(name, usage, func(c *restoreConfig) *runConfig { return &c.shared })
	}
	b := func(s string) bool { return s == "true" }
	opts := []option[restoreConfig]{
		shared("endpoint", "DynamoDB endpoint URL of the table written to (default: AWS's endpoint for the region)"),
		shared("region", ""),
	}
	opts = append(opts, selectOptions(func(c *restoreConfig) *selectFlags { return &c.sel },
		"the table whose archived items to restore (required; written back to it unless --to-table)")...)
	return append(opts,
		option[restoreConfig]{name: "to-table", usage: "write the items to this table instead (it must exist, with the same key schema)",
			get: func(c *restoreConfig) any { return c.ToTable }, set: func(c *restoreConfig, s string, _ []string, _ time.Duration) { c.ToTable = s }},
		option[restoreConfig]{name: "overwrite", boolean: true, def: "false", usage: "replace items that exist (default: an item whose key exists is left alone and counted)",
			get: func(c *restoreConfig) any { return c.Overwrite }, set: func(c *restoreConfig, s string, _ []string, _ time.Duration) { c.Overwrite = b(s) }},
		option[restoreConfig]{name: "ttl-extend", kind: kindDuration, def: "168h", usage: "restored items expire this long after the restore started (their TTL attribute is set so)",
			get: func(c *restoreConfig) any { return c.TTLExtend }, set: func(c *restoreConfig, _ string, _ []string, d time.Duration) { c.TTLExtend = d }},
		option[restoreConfig]{name: "keep-ttl", boolean: true, def: "false", usage: "write the TTL attribute as archived (the item expires again at DynamoDB's next pass)",
			get: func(c *restoreConfig) any { return c.KeepTTL }, set: func(c *restoreConfig, s string, _ []string, _ time.Duration) { c.KeepTTL = b(s) }},
		option[restoreConfig]{name: "remove-ttl", boolean: true, def: "false", usage: "drop the TTL attribute (the item never expires)",
			get: func(c *restoreConfig) any { return c.RemoveTTL }, set: func(c *restoreConfig, s string, _ []string, _ time.Duration) { c.RemoveTTL = b(s) }},
		option[restoreConfig]{name: "ttl-attribute", usage: "the TTL attribute (default: the one DescribeTimeToLive names for the table written to, else the archive's)",
			get: func(c *restoreConfig) any { return c.TTLAttribute }, set: func(c *restoreConfig, s string, _ []string, _ time.Duration) { c.TTLAttribute = s }},
		option[restoreConfig]{name: "dry-run", boolean: true, def: "false", usage: "print each selected item's key and what would be done, write nothing",
			get: func(c *restoreConfig) any { return c.DryRun }, set: func(c *restoreConfig, s string, _ []string, _ time.Duration) { c.DryRun = b(s) }},
		option[restoreConfig]{name: "rate", kind: kindInt, def: "0", usage: "cap on PutItem requests per second, retries included (0: none)",
			get: func(c *restoreConfig) any { return c.Rate }, set: func(c *restoreConfig, s string, _ []string, _ time.Duration) { c.Rate, _ = strconv.Atoi(s) }},
		option[restoreConfig]{name: "parallel", kind: kindInt, def: "8", usage: "concurrent writers (one key always goes to the same writer)",
			get: func(c *restoreConfig) any { return c.Parallel }, set: func(c *restoreConfig, s string, _ []string, _ time.Duration) { c.Parallel, _ = strconv.Atoi(s) }},
		option[restoreConfig]{name: "resume", typ: "file", usage: "FILE recording progress: run again with the same file after an interruption (even kill -9) and every item is written exactly once",
			get: func(c *restoreConfig) any { return c.Resume }, set: func(c *restoreConfig, s string, _ []string, _ time.Duration) { c.Resume = s }},
		shared("log-level", ""),
		shared("config", ""),
		shared("print-config", ""),
	)
}

// sharedRunOption is run's option of that name on a command whose
// configuration C holds a runConfig; usage, when set, replaces run's.
func sharedRunOption[C any](name, usage string, shared func(*C) *runConfig) option[C] {
	o := runOption(name)
	get, set := o.get, o.set
	so := option[C]{
		name: o.name, alias: o.alias, kind: o.kind, typ: o.typ, def: o.def, usage: o.usage, secret: o.secret, noFile: o.noFile, boolean: o.boolean,
		get: func(c *C) any { return get(shared(c)) },
		set: func(c *C, s string, l []string, d time.Duration) { set(shared(c), s, l, d) },
	}
	if usage != "" {
		so.usage = usage
	}
	return so
}

func validateRestoreOption(c *restoreConfig, o option[restoreConfig], from string, p *cli.Problems) {
	if c.sel.validate(o.name, from, p) {
		if o.name == "table" && len(c.sel.Tables) != 1 {
			p.Add("%s: required, once: the table whose archived items to restore", from)
		}
		return
	}
	switch o.name {
	case "to-table":
		if c.ToTable != "" && event.ValidTableName(c.ToTable) != nil {
			p.Add("%s: table name %q must be 3-255 letters, digits, '_', '-' or '.'", from, c.ToTable)
		}
	case "ttl-extend":
		if c.TTLExtend <= 0 {
			p.Add("%s: %s must be positive", from, c.TTLExtend)
		}
	case "rate":
		if c.Rate < 0 {
			p.Add("%s: %d must be 0 (no cap) or positive", from, c.Rate)
		}
	case "parallel":
		if c.Parallel < 1 || c.Parallel > 256 {
			p.Add("%s: %d must be from 1 to 256", from, c.Parallel)
		}
	case "ttl-attribute":
		if c.TTLAttribute != "" && !validAttrName(c.TTLAttribute) {
			p.Add("%s: %q %s", from, c.TTLAttribute, attrNameProblem)
		}
	case "overwrite", "keep-ttl", "remove-ttl", "dry-run", "resume":
	default:
		validateOption(&c.shared, runOption(o.name), from, p)
	}
}

func validateRestore(c *restoreConfig, p *cli.Problems) {
	if c.KeepTTL && c.RemoveTTL {
		p.Add("--keep-ttl and --remove-ttl: choose one")
	}
	if c.DryRun && c.Resume != "" {
		p.Add("--dry-run and --resume: a dry run records nothing; drop --resume")
	}
}

// restoreCmd is `archiver restore`: it writes archived items back into
// DynamoDB, prints a summary, and fails when any item could not be written.
func restoreCmd(ctx context.Context, args []string, e env) error {
	return jobCmd(ctx, args, e, restoreCommand, func(c *restoreConfig) (*runConfig, *map[string]string) {
		return &c.shared, &c.source
	}, runRestore)
}

// jobCmd starts a command that runs as a job over the archive (restore,
// replay): it loads the configuration, prints it when asked, and runs the
// command with the job's logger and progress. parts gives the
// configuration's shared run options and where its sources go.
func jobCmd[C any](ctx context.Context, args []string, e env, cmd command[C],
	parts func(*C) (*runConfig, *map[string]string), run func(context.Context, *C, env, *job) error) error {
	cfg := new(C)
	src, err := loadConfig(cmd, cfg, args, e.getenv, e.stdout)
	if err != nil {
		return err
	}
	shared, source := parts(cfg)
	*source = src
	if shared.PrintConfig {
		return printOptions(e.stdout, cmd, cfg, src)
	}
	j, err := newJob(cmd.name, shared.LogLevel, e)
	if err != nil {
		return err
	}
	defer func() { _ = j.log.Sync() }()
	return run(ctx, cfg, e, j)
}

func runRestore(ctx context.Context, cfg *restoreConfig, e env, j *job) error {
	log := j.log
	asel, rsel, err := cfg.sel.selection(time.Now())
	if err != nil {
		return cli.Usagef("archiver restore: %v", err)
	}
	a, err := archive.Open(ctx, cfg.sel.From, archive.Options{Logger: log.Named("archive"), OnBadLine: badLineLogger(log)})
	if err != nil {
		return err
	}
	j.arch = a
	awsCfg, err := loadAWSConfig(ctx, "restore", cfg.shared.Region, cfg.shared.Endpoint, log)
	if err != nil {
		return err
	}
	db := dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) {
		if cfg.shared.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.shared.Endpoint)
		}
	})
	table := cfg.sel.Tables[0]
	if cfg.ToTable != "" {
		table = cfg.ToTable
	}
	if _, err := shard.CheckTables(ctx, shard.SourceCheck{Tables: db, TableNames: []string{table}, Endpoint: cfg.shared.Endpoint, Region: awsCfg.Region}); err != nil {
		return fmt.Errorf("the table written to: %w", err)
	}
	rc := restore.Config{DB: db, Table: table, Select: rsel, TTLExtend: cfg.TTLExtend, TTLAttribute: cfg.TTLAttribute,
		Overwrite: cfg.Overwrite, Rate: float64(cfg.Rate), Parallel: cfg.Parallel, ResumeFile: cfg.Resume, Logger: log.Named("restore")}
	switch {
	case cfg.KeepTTL:
		rc.TTL = restore.TTLKeep
	case cfg.RemoveTTL:
		rc.TTL = restore.TTLRemove
	}
	if cfg.DryRun {
		rc.DryRun = e.stdout
	}
	rc.Progress = j.rep
	stop := j.rep.Start(ctx)
	var stats archive.Stats
	started := time.Now()
	res, err := restore.Run(ctx, rc, restore.ArchiveSource(a, asel, &stats))
	stop()
	summary := e.stdout
	if cfg.DryRun {
		summary = e.stderr // stdout carries what would be written
	}
	if err == nil || res != (restore.Result{}) || stats.Objects > 0 {
		// A restore that failed before it did anything prints its error
		// alone, not a table of zeros first.
		printRestoreSummary(summary, table, cfg, res, stats, time.Since(started))
	}
	if res.NoImage > 0 {
		log.Warn("archived events without an item image were skipped: the table's stream view type was KEYS_ONLY (or NEW_IMAGE) when they were archived, so the archive holds only their keys",
			zap.Int64("events", res.NoImage))
	}
	return err
}

// job is a long command's progress and logs on stderr: on a terminal a
// live bar, which log lines clear before they are written; elsewhere JSON
// logs, a progress line among them every 10 s. The objects done and their
// total come from arch once it is set (before the reporter starts).
type job struct {
	log  *zap.Logger
	rep  *progress.Reporter
	arch *archive.Archive
}

func newJob(label, level string, e env) (*job, error) {
	j := &job{}
	objects := func() (int64, int64) {
		if j.arch == nil {
			return 0, 0
		}
		p := j.arch.Progress()
		return p.ObjectsDone, p.ObjectsTotal
	}
	if f, ok := e.stderr.(*os.File); ok && logging.IsTerminal(f) {
		j.rep = progress.New(progress.Options{Label: label, Out: e.stderr, TTY: true, Objects: objects})
		log, err := logging.New(j.rep.LogWriter(e.stderr), level, logging.FormatConsole)
		j.log = log
		return j, err
	}
	log, err := logging.New(e.stderr, level, logging.FormatAuto)
	if err != nil {
		return nil, err
	}
	j.log = log
	j.rep = progress.New(progress.Options{Label: label, Logger: log.Named("progress"), Objects: objects})
	return j, nil
}

// badLineLogger logs archive lines that do not decode (they are skipped).
func badLineLogger(log *zap.Logger) func(string, int, error) {
	return func(object string, line int, err error) {
		log.Warn("an archive line does not decode; skipped", zap.String("object", object), zap.Int("line", line), zap.Error(err))
	}
}

func printRestoreSummary(w io.Writer, table string, cfg *restoreConfig, r restore.Result, st archive.Stats, el time.Duration) {
	title := fmt.Sprintf("restore into %s", table)
	if cfg.DryRun {
		title += " (dry run: nothing written)"
	}
	t := progress.KV(title,
		"archive objects read", st.Objects,
		"archive lines", st.Lines,
		"duplicate lines", st.Duplicates,
		"undecodable lines", st.Undecodable,
		"events selected by the archive", r.Events,
		"left out by --key/--where", r.NotSelected,
	)
	if cfg.DryRun {
		t.Add("would be written", r.WouldWrite)
	} else {
		t.Add("written", r.Written)
		t.Add("skipped: item exists", r.Exists)
		t.Add("skipped: done by an earlier run", r.Resumed)
		t.Add("failed", r.Failed)
		t.Add("throttled (retried)", r.Throttled)
	}
	t.Add("skipped: keys only (no image)", r.NoImage)
	t.Add("elapsed", el.Round(time.Millisecond))
	_ = t.Print(w)
}
