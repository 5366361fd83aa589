package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/ttl-archiver/archiver/checkpoint"
	"github.com/ttl-archiver/archiver/cmd/internal/cli"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/logging"
	"github.com/ttl-archiver/archiver/internal/redact"
	"github.com/ttl-archiver/archiver/lease"
	"github.com/ttl-archiver/archiver/shard"
	"github.com/ttl-archiver/archiver/sinks"
)

// runConfig is the effective configuration of `archiver run`.
type runConfig struct {
	Endpoint        string
	Region          string
	Regions         []string
	PerRegion       bool
	Tables          []string
	TablesTagged    []string
	TablesRefresh   time.Duration
	StreamARNs      []string
	Checkpoint      string
	CheckpointNS    string
	Sinks           []string
	DeadLetter      string
	RetryFor        time.Duration
	StreamRetention time.Duration
	Start           string
	ExpiredWhen     string
	TTLAttribute    string
	WorkerID        string
	LeaseDuration   time.Duration
	LeaseRenew      time.Duration
	ShutdownTimeout time.Duration
	MaxInFlight     string
	LogLevel        string
	MetricsAddr     string
	Metrics         string
	Pprof           bool
	SDKDecoding     bool
	SkipPreflight   bool
	AllowKeysOnly   bool
	WaitForTable    time.Duration

	ConfigFile  string
	PrintConfig bool
	// source says where each option's value came from: flag, env, file or
	// default (keyed by option name).
	source map[string]string
}

type optKind int

const (
	kindString optKind = iota
	kindList
	kindURLList // a list whose items are URLs that may themselves contain commas
	kindDuration
	kindInt // a whole number
)

// option is one setting of a command (`archiver run`, `archiver sweep`) whose
// configuration is C: a flag, an ARCHIVER_* variable and a key of the YAML
// file, all with the same name.
type option[C any] struct {
	name    string // flag name and YAML key
	alias   string // alternative YAML key (plural form of a repeatable)
	kind    optKind
	typ     string // the value's type as help shows it (default: from kind)
	def     string
	usage   string
	secret  bool // values are URLs whose credentials must be masked
	get     func(*C) any
	set     func(*C, string, []string, time.Duration)
	noFile  bool // flag and env only (config, print-config)
	boolean bool
}

// typeName is the value's type as help shows it: "-retry-for duration".
func (o option[C]) typeName() string {
	if o.typ != "" {
		return o.typ
	}
	switch o.kind {
	case kindDuration:
		return "duration"
	case kindInt:
		return "int"
	case kindURLList:
		return "url"
	}
	return "string"
}

func (o option[C]) env() string {
	return "ARCHIVER_" + strings.ToUpper(strings.ReplaceAll(o.name, "-", "_"))
}

// command is what loadConfig needs to know of a command whose
// configuration is C.
type command[C any] struct {
	name    string // "run", "sweep"
	options []option[C]
	// validate checks one option's value; from names the flag and where
	// the value came from.
	validate func(c *C, o option[C], from string, p *cli.Problems)
	// check checks rules that involve several options.
	check func(c *C, p *cli.Problems)
}

// runCommand is `archiver run`'s configuration.
var runCommand = command[runConfig]{name: "run", options: runOptions, validate: validateOption, check: validateRun}

var runOptions = []option[runConfig]{
	{name: "endpoint", typ: "url", secret: true, usage: "DynamoDB and DynamoDB Streams endpoint URL (default: AWS's endpoint for the region)",
		get: func(c *runConfig) any { return c.Endpoint }, set: func(c *runConfig, s string, _ []string, _ time.Duration) { c.Endpoint = s }},
	{name: "region", usage: "AWS region (default: the AWS configuration's, or us-east-1 with a loopback --endpoint)",
		get: func(c *runConfig) any { return c.Region }, set: func(c *runConfig, s string, _ []string, _ time.Duration) { c.Region = s }},
	{name: "regions", kind: kindList, typ: "region", usage: "the Regions whose replicas of each --table (a global table) are read, each through clients signed for it: a list, or all (every Region the table has a replica in, as DescribeTable in --region says); each Region's stream marks the expiries its own TTL performed, so reading every replica archives every expiry once (default: --region alone)",
		get: func(c *runConfig) any { return c.Regions }, set: func(c *runConfig, _ string, l []string, _ time.Duration) { c.Regions = l }},
	{name: "per-region", boolean: true, def: "false", usage: "an archiver like this one runs in each other Region of the global tables read (one deployment per Region, e.g. the Terraform module once per Region): a global table read in this Region alone is then logged at INFO; without it, at WARN, naming the Regions whose expiries this archiver does not archive",
		get: func(c *runConfig) any { return c.PerRegion }, set: func(c *runConfig, s string, _ []string, _ time.Duration) { c.PerRegion = s == "true" }},
	{name: "table", alias: "tables", kind: kindList, usage: "table whose stream to archive (repeatable)",
		get: func(c *runConfig) any { return c.Tables }, set: func(c *runConfig, _ string, l []string, _ time.Duration) { c.Tables = l }},
	{name: "tables-tagged", kind: kindList, typ: "KEY=VALUE", usage: "archive every table of --region carrying this tag, also ones tagged or created while run runs (found within --tables-refresh, read from their stream's start); repeatable: a table must carry every tag given; a table no longer tagged, or deleted, is let go (a deleted one once its stream is read); combines with --table and --stream-arn, not with --regions; with no table tagged yet run waits and says so",
		get: func(c *runConfig) any { return c.TablesTagged }, set: func(c *runConfig, _ string, l []string, _ time.Duration) { c.TablesTagged = l }},
	{name: "tables-refresh", kind: kindDuration, def: "30s", usage: "with --tables-tagged: how often the tables' tags are read again (ListTables, and ListTagsOfResource per table at most 10 a second)",
		get: func(c *runConfig) any { return c.TablesRefresh }, set: func(c *runConfig, _ string, _ []string, d time.Duration) { c.TablesRefresh = d }},
	{name: "stream-arn", alias: "stream-arns", kind: kindList, usage: "stream ARN to archive (repeatable)",
		get: func(c *runConfig) any { return c.StreamARNs }, set: func(c *runConfig, _ string, l []string, _ time.Duration) { c.StreamARNs = l }},
	{name: "checkpoint", typ: "url", secret: true, usage: "checkpoint store: file://PATH (one worker) or dynamodb://TABLE[?endpoint=&region=&create=true] (many workers)",
		get: func(c *runConfig) any { return c.Checkpoint }, set: func(c *runConfig, s string, _ []string, _ time.Duration) { c.Checkpoint = s }},
	{name: "checkpoint-namespace", typ: "name", usage: "with dynamodb:// checkpoints: keep this deployment's leases and checkpoints apart from other deployments sharing the lease table (1 to 32 letters, digits, '_' or '-'); every worker of one deployment must give the same; default: none, the keys as before",
		get: func(c *runConfig) any { return c.CheckpointNS }, set: func(c *runConfig, s string, _ []string, _ time.Duration) { c.CheckpointNS = s }},
	{name: "sink", alias: "sinks", kind: kindURLList, secret: true, usage: "sink URL: s3://BUCKET/PREFIX, nats://HOST:PORT, file://DIR, stdout:// (repeatable; ?events=expired,deleted picks kinds)",
		get: func(c *runConfig) any { return c.Sinks }, set: func(c *runConfig, _ string, l []string, _ time.Duration) { c.Sinks = l }},
	{name: "dead-letter", typ: "url", secret: true, usage: "sink URL (file://DIR, s3://BUCKET/PREFIX, ...) for what can never be delivered: records that cannot be decoded, and events a sink fails permanently or for longer than --retry-for, each with the failing sink, the error, the attempts and the first failure time (default: none; failing batches are retried until fixed)",
		get: func(c *runConfig) any { return c.DeadLetter }, set: func(c *runConfig, s string, _ []string, _ time.Duration) { c.DeadLetter = s }},
	{name: "retry-for", kind: kindDuration, def: "15m", usage: "with --dead-letter: how long a batch may keep failing at one sink before its events go to the dead-letter sink",
		get: func(c *runConfig) any { return c.RetryFor }, set: func(c *runConfig, _ string, _ []string, d time.Duration) { c.RetryFor = d }},
	{name: "skip-preflight", boolean: true, def: "false", usage: "start without first proving that every sink (the dead-letter sink too) can write: S3 bucket exists (HeadBucket, s3:ListBucket) and takes an object (and the KMS key with sse=aws:kms), NATS connected and a stream captures the subjects, directory writable; for roles that may write but not list",
		get: func(c *runConfig) any { return c.SkipPreflight }, set: func(c *runConfig, s string, _ []string, _ time.Duration) { c.SkipPreflight = s == "true" }},
	{name: "allow-keys-only", boolean: true, def: "false", usage: "start although a table's stream carries no old image (view type KEYS_ONLY or NEW_IMAGE) while a sink takes expired or deleted items: those are then archived as their keys alone, each line marked \"image\":\"keys-only\" in its Metadata (default: such a table makes run exit 1 naming it and the fix)",
		get: func(c *runConfig) any { return c.AllowKeysOnly }, set: func(c *runConfig, s string, _ []string, _ time.Duration) { c.AllowKeysOnly = s == "true" }},
	{name: "wait-for-table", kind: kindDuration, def: "0s", usage: "at start-up, wait this long for a table that does not exist yet or has no stream yet (one a deployment creates later), polling and logging what it waits for (default: such a table makes run exit 1 at once)",
		get: func(c *runConfig) any { return c.WaitForTable }, set: func(c *runConfig, _ string, _ []string, d time.Duration) { c.WaitForTable = d }},
	{name: "stream-retention", kind: kindDuration, def: "24h", usage: "how long the stream keeps records (DynamoDB Streams: 24h; a local archiver engine's --stream-retention): stuck-shard alarms count the time left before the trim from it, and a shard missing from the stream's description counts as gone only once its records could have been trimmed",
		get: func(c *runConfig) any { return c.StreamRetention }, set: func(c *runConfig, _ string, _ []string, d time.Duration) { c.StreamRetention = d }},
	{name: "start", def: "trim-horizon", usage: "where shards without a checkpoint start: trim-horizon or latest",
		get: func(c *runConfig) any { return c.Start }, set: func(c *runConfig, s string, _ []string, _ time.Duration) { c.Start = s }},
	{name: "expired-when", def: "service", usage: "which REMOVE records are expiries: service (only DynamoDB's own TTL deletes) or past-ttl (also any other delete made after the item's TTL had passed, such as archiver sweep's; under service such deletes are counted in archiver_ttl_passed_user_deletes_total and warned about once a minute); every REMOVE's archive line (deletedBy) and NATS message (Archiver-Deleted-By) say whether DynamoDB's TTL (dynamodb-ttl) or another principal (other) deleted the item",
		get: func(c *runConfig) any { return c.ExpiredWhen }, set: func(c *runConfig, s string, _ []string, _ time.Duration) { c.ExpiredWhen = s }},
	{name: "ttl-attribute", usage: "the tables' TTL attribute, for tables whose DynamoDB TTL is off while archiver sweep expires them (with --expired-when past-ttl); default: the one DescribeTimeToLive names",
		get: func(c *runConfig) any { return c.TTLAttribute }, set: func(c *runConfig, s string, _ []string, _ time.Duration) { c.TTLAttribute = s }},
	{name: "worker-id", usage: "this worker's lease owner name (default: the ECS task ID, else HOST-PID)",
		get: func(c *runConfig) any { return c.WorkerID }, set: func(c *runConfig, s string, _ []string, _ time.Duration) { c.WorkerID = s }},
	{name: "lease-duration", kind: kindDuration, def: "20s", usage: "with dynamodb:// checkpoints: how long a shard lease stays valid without renewal",
		get: func(c *runConfig) any { return c.LeaseDuration }, set: func(c *runConfig, _ string, _ []string, d time.Duration) { c.LeaseDuration = d }},
	{name: "lease-renew", kind: kindDuration, def: "5s", usage: "with dynamodb:// checkpoints: how often leases are renewed (at most a third of --lease-duration)",
		get: func(c *runConfig) any { return c.LeaseRenew }, set: func(c *runConfig, _ string, _ []string, d time.Duration) { c.LeaseRenew = d }},
	{name: "shutdown-timeout", kind: kindDuration, def: "25s", usage: "on SIGTERM, time to flush sinks, checkpoint and release leases (keep it under ECS's stopTimeout)",
		get: func(c *runConfig) any { return c.ShutdownTimeout }, set: func(c *runConfig, _ string, _ []string, d time.Duration) { c.ShutdownTimeout = d }},
	{name: "max-in-flight-bytes", typ: "bytes", def: "128MiB", usage: "memory budget, over all shards, for decoded records read and not yet acknowledged by every sink (estimated, the sinks' rendered copies included; with GC headroom and the sinks' own buffers the process peaks near 2.5x this)",
		get: func(c *runConfig) any { return c.MaxInFlight }, set: func(c *runConfig, s string, _ []string, _ time.Duration) { c.MaxInFlight = s }},
	{name: "log-level", def: "info", usage: "debug, info, warn or error",
		get: func(c *runConfig) any { return c.LogLevel }, set: func(c *runConfig, s string, _ []string, _ time.Duration) { c.LogLevel = s }},
	{name: "metrics-addr", def: ":9090", usage: "listen address of /metrics, /healthz and /readyz",
		get: func(c *runConfig) any { return c.MetricsAddr }, set: func(c *runConfig, s string, _ []string, _ time.Duration) { c.MetricsAddr = s }},
	{name: "metrics", def: "prometheus", usage: "prometheus (serve /metrics), emf (serve /metrics and also write CloudWatch embedded metric format on stdout) or none",
		get: func(c *runConfig) any { return c.Metrics }, set: func(c *runConfig, s string, _ []string, _ time.Duration) { c.Metrics = s }},
	{name: "sdk-decoding", boolean: true, def: "false", usage: "decode GetRecords responses with the AWS SDK's general decoder instead of the archiver's own (same result, about twice the decoding CPU): an escape hatch",
		get: func(c *runConfig) any { return c.SDKDecoding }, set: func(c *runConfig, s string, _ []string, _ time.Duration) { c.SDKDecoding = s == "true" }},
	{name: "pprof", boolean: true, def: "false", usage: "also serve Go's runtime profiles (CPU, heap, goroutines, trace) under /debug/pprof/ on --metrics-addr; off by default, as they reveal internals",
		get: func(c *runConfig) any { return c.Pprof }, set: func(c *runConfig, s string, _ []string, _ time.Duration) { c.Pprof = s == "true" }},
	{name: "config", typ: "file", noFile: true, usage: "YAML configuration file (keys are the flag names)",
		get: func(c *runConfig) any { return c.ConfigFile }, set: func(c *runConfig, s string, _ []string, _ time.Duration) { c.ConfigFile = s }},
	{name: "print-config", noFile: true, boolean: true, usage: "print the effective configuration (secrets masked) and exit",
		get: func(c *runConfig) any { return c.PrintConfig }, set: func(c *runConfig, s string, _ []string, _ time.Duration) { c.PrintConfig = s == "true" }},
}

// listFlag collects a repeatable flag.
// listFlag is a repeatable flag; help shows typ and, as the default, def
// (which the option's set applies when the flag is not given).
type listFlag struct {
	vals []string
	url  bool
	typ  string
	def  string
}

func (l *listFlag) Type() string { return l.typ }
func (l *listFlag) String() string {
	if l == nil {
		return ""
	}
	if l.vals == nil {
		return l.def
	}
	return strings.Join(l.vals, ",")
}
func (l *listFlag) Set(s string) error {
	if l.url {
		l.vals = append(l.vals, s)
	} else {
		l.vals = append(l.vals, splitList(s, false)...)
	}
	return nil
}

var schemeStart = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://`)

// splitList splits a comma-separated list. For URL lists a comma separates
// items only where the next item starts with a scheme ("x://"), so commas
// inside a URL (nats://h1,h2 or ?events=expired,deleted) survive.
func splitList(s string, urls bool) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] != ',' {
			continue
		}
		if urls && !schemeStart.MatchString(strings.TrimSpace(s[i+1:])) {
			continue
		}
		out = append(out, s[start:i])
		start = i + 1
	}
	out = append(out, s[start:])
	res := out[:0]
	for _, v := range out {
		if v = strings.TrimSpace(v); v != "" {
			res = append(res, v)
		}
	}
	return res
}

// loadRunConfig resolves every option with precedence flag > environment >
// config file > default, then validates the result. Every problem found is
// reported in one *cli.UsageError, one line each, naming the flag (and the
// variable or file key when the value came from there).
func loadRunConfig(args []string, getenv func(string) string, stdout io.Writer) (*runConfig, error) {
	cfg := &runConfig{}
	src, err := loadConfig(runCommand, cfg, args, getenv, stdout)
	if err != nil {
		return nil, err
	}
	cfg.source = src
	return cfg, nil
}

// loadConfig resolves every option of cmd into cfg with precedence flag >
// environment > config file > default, then validates the result (see
// loadRunConfig), and returns where each value came from: flag, env, file
// or default (keyed by option name). Every command has a "config" option.
func loadConfig[C any](cmd command[C], cfg *C, args []string, getenv func(string) string, stdout io.Writer) (map[string]string, error) {
	fs := flag.NewFlagSet("archiver "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	strs := map[string]*cli.TypedString{}
	lists := map[string]*listFlag{}
	bools := map[string]*bool{}
	for _, o := range cmd.options {
		usage := fmt.Sprintf("%s (env %s)", o.usage, o.env())
		switch {
		case o.boolean:
			bools[o.name] = fs.Bool(o.name, false, usage)
		case o.kind == kindList || o.kind == kindURLList:
			l := &listFlag{url: o.kind == kindURLList, typ: o.typeName(), def: o.def}
			lists[o.name] = l
			fs.Var(l, o.name, usage)
		default:
			s := &cli.TypedString{Text: o.def, TypeName: o.typeName()}
			strs[o.name] = s
			fs.Var(s, o.name, usage)
		}
	}
	if err := cli.ParseFlags(fs, args, stdout, "usage: archiver "+cmd.name+" [flags]\n\nEvery flag is also an environment variable (ARCHIVER_ + name in upper case,\nrepeatable flags comma-separated) and a key of the --config YAML file.\nPrecedence: flag > environment > file > default.\n\nflags:\n"); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, cli.Usagef("archiver %s: unexpected argument %q (all settings are flags)", cmd.name, redact.URL(fs.Arg(0)))
	}
	setFlags := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { setFlags[f.Name] = true })

	source := map[string]string{}
	var probs cli.Problems

	// The config file's path itself: flag > env.
	cfgPath := strs["config"].Text
	if !setFlags["config"] {
		cfgPath = getenv("ARCHIVER_CONFIG")
	}
	fileVals := map[string]*yaml.Node{}
	if cfgPath != "" {
		var err error
		fileVals, err = readConfigFile(cfgPath, cmd.options)
		if err != nil {
			probs.Add("--config %s: %v", cfgPath, err)
			fileVals = map[string]*yaml.Node{}
		}
	}

	for _, o := range cmd.options {
		var (
			raw  string
			list []string
			src  = "default"
			from = "--" + o.name
		)
		raw = o.def
		switch {
		case setFlags[o.name]:
			src = "flag"
			if l, ok := lists[o.name]; ok {
				list = l.vals
			} else if o.boolean {
				raw = strconv.FormatBool(*bools[o.name])
			} else {
				raw = strs[o.name].Text
			}
		case getenv(o.env()) != "":
			src, from = "env", fmt.Sprintf("--%s (from %s)", o.name, o.env())
			raw = getenv(o.env())
			if o.kind == kindList || o.kind == kindURLList {
				list = splitList(raw, o.kind == kindURLList)
			} else if o.boolean {
				b, err := strconv.ParseBool(raw)
				if err != nil {
					probs.Add("%s: %q is not true or false", from, raw)
				}
				raw = strconv.FormatBool(b)
			}
		case !o.noFile && fileNode(fileVals, o) != nil:
			src, from = "file", fmt.Sprintf("--%s (from %s key %q)", o.name, cfgPath, fileKey(fileVals, o))
			n := fileNode(fileVals, o)
			var err error
			if o.kind == kindList || o.kind == kindURLList {
				list, err = nodeList(n)
			} else {
				raw, err = nodeScalar(n)
			}
			if err != nil {
				probs.Add("%s: %v", from, err)
				continue
			}
			if o.boolean {
				b, err := strconv.ParseBool(raw)
				if err != nil {
					probs.Add("%s: %q is not true or false", from, raw)
					continue
				}
				raw = strconv.FormatBool(b)
			}
		}
		source[o.name] = src
		var d time.Duration
		switch o.kind {
		case kindDuration:
			var err error
			d, err = time.ParseDuration(raw)
			if err != nil {
				probs.Add("%s: %q is not a duration like 25s or 1m", from, raw)
				continue
			}
		case kindInt:
			if _, err := strconv.Atoi(strings.TrimSpace(raw)); err != nil {
				probs.Add("%s: %q is not a whole number", from, raw)
				continue
			}
		}
		o.set(cfg, strings.TrimSpace(raw), list, d)
		cmd.validate(cfg, o, from, &probs)
	}
	cmd.check(cfg, &probs)
	if err := probs.Err("archiver " + cmd.name); err != nil {
		return nil, err
	}
	return source, nil
}

func readConfigFile[C any](path string, options []option[C]) (map[string]*yaml.Node, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return map[string]*yaml.Node{}, nil
		}
		return nil, fmt.Errorf("not valid YAML: %w", err)
	}
	if len(doc.Content) == 0 {
		return map[string]*yaml.Node{}, nil
	}
	m := doc.Content[0]
	if m.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("want a mapping of option names to values at the top level")
	}
	known := map[string]bool{}
	for _, o := range options {
		if !o.noFile {
			known[o.name] = true
			if o.alias != "" {
				known[o.alias] = true
			}
		}
	}
	out := map[string]*yaml.Node{}
	var unknown []string
	for i := 0; i+1 < len(m.Content); i += 2 {
		k := m.Content[i].Value
		if !known[k] {
			unknown = append(unknown, fmt.Sprintf("%q (line %d)", k, m.Content[i].Line))
			continue
		}
		out[k] = m.Content[i+1]
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("unknown key %s", strings.Join(unknown, ", "))
	}
	for _, o := range options {
		if o.alias != "" && out[o.name] != nil && out[o.alias] != nil {
			return nil, fmt.Errorf("both %q and %q given; use one", o.name, o.alias)
		}
	}
	return out, nil
}

func fileNode[C any](vals map[string]*yaml.Node, o option[C]) *yaml.Node {
	if n := vals[o.name]; n != nil {
		return n
	}
	if o.alias != "" {
		return vals[o.alias]
	}
	return nil
}

func fileKey[C any](vals map[string]*yaml.Node, o option[C]) string {
	if vals[o.name] != nil || o.alias == "" {
		return o.name
	}
	return o.alias
}

func nodeScalar(n *yaml.Node) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", fmt.Errorf("want a single value (line %d)", n.Line)
	}
	return n.Value, nil
}

func nodeList(n *yaml.Node) ([]string, error) {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Value == "" {
			return nil, nil
		}
		return []string{n.Value}, nil
	case yaml.SequenceNode:
		var out []string
		for _, c := range n.Content {
			if c.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("want a list of strings (line %d)", c.Line)
			}
			out = append(out, c.Value)
		}
		return out, nil
	}
	return nil, fmt.Errorf("want a string or a list of strings (line %d)", n.Line)
}

var (
	streamARNRE = regexp.MustCompile(`^arn:aws[a-z-]*:dynamodb:[a-z0-9-]+:[0-9]{12}:table/[A-Za-z0-9_.-]{3,255}/stream/.+$`)
)

// validateOption checks one option's value; from names the flag and where
// the value came from.
func validateOption(c *runConfig, o option[runConfig], from string, p *cli.Problems) {
	switch o.name {
	case "endpoint":
		if c.Endpoint != "" {
			if err := checkHTTPURL(c.Endpoint); err != nil {
				p.Add("%s: %v", from, err)
			}
		}
	case "region":
		if c.Region != "" && !cli.IsRegion(c.Region) {
			p.Add("%s: %q is not a region name like us-east-1", from, c.Region)
		}
	case "regions":
		validateRegions(c.Regions, from, p)
	case "table":
		for _, t := range c.Tables {
			if event.ValidTableName(t) != nil {
				p.Add("%s: table name %q must be 3-255 letters, digits, '_', '-' or '.'", from, t)
			}
		}
	case "tables-tagged":
		for _, tg := range c.TablesTagged {
			if _, err := shard.ParseTag(tg); err != nil {
				p.Add("%s: %v (want KEY=VALUE, e.g. archive=yes)", from, err)
			}
		}
	case "tables-refresh":
		if c.TablesRefresh <= 0 {
			p.Add("%s: %s must be positive", from, c.TablesRefresh)
		}
	case "checkpoint-namespace":
		if err := lease.CheckNamespace(c.CheckpointNS); err != nil {
			p.Add("%s: %v", from, err)
		}
	case "stream-arn":
		for _, a := range c.StreamARNs {
			if !streamARNRE.MatchString(a) {
				p.Add("%s: %q is not a DynamoDB stream ARN (arn:aws:dynamodb:REGION:ACCOUNT:table/TABLE/stream/LABEL)", from, a)
			}
		}
	case "checkpoint":
		if c.Checkpoint == "" {
			p.Add("%s: required: file://PATH for one worker or dynamodb://TABLE for many", from)
			return
		}
		if err := checkCheckpointURL(c.Checkpoint); err != nil {
			p.Add("%s: %v", from, err)
		}
	case "sink":
		if len(c.Sinks) == 0 {
			p.Add("%s: at least one sink is required (s3://, nats://, file:// or stdout://)", from)
		}
		for _, s := range c.Sinks {
			if err := checkSinkURL(s); err != nil {
				p.Add("%s: %v", from, err)
			}
		}
	case "dead-letter":
		if c.DeadLetter == "" {
			return
		}
		if err := checkSinkURL(c.DeadLetter); err != nil {
			p.Add("%s: %v", from, err)
		} else if u, _ := url.Parse(c.DeadLetter); u.Query().Has("events") {
			p.Add("%s: events= does not apply: the dead-letter sink takes every event it is given", from)
		}
		for _, s := range c.Sinks {
			if s == c.DeadLetter {
				p.Add("%s: %q is also a --sink: dead letters would mix with the archive", from, redact.URL(s))
			}
		}
	case "retry-for", "stream-retention":
		if d := o.get(c).(time.Duration); d <= 0 {
			p.Add("%s: %s must be positive", from, d)
		}
	case "start":
		if pos, err := shard.ParseStartPosition(c.Start); err != nil || c.Start == "" {
			p.Add("%s: %q is not trim-horizon or latest", from, c.Start)
		} else {
			c.Start = string(pos)
		}
	case "expired-when":
		if _, err := event.ParseExpiredWhen(c.ExpiredWhen); err != nil {
			p.Add("%s: %v", from, err)
		}
	case "ttl-attribute":
		if c.TTLAttribute != "" && !validAttrName(c.TTLAttribute) {
			p.Add("%s: %q %s", from, c.TTLAttribute, attrNameProblem)
		}
	case "worker-id":
		if strings.ContainsFunc(c.WorkerID, func(r rune) bool { return r < 0x21 || r == 0x7f }) {
			p.Add("%s: %q must not contain spaces or control characters", from, c.WorkerID)
		}
	case "lease-duration", "lease-renew":
		if d := o.get(c).(time.Duration); d <= 0 {
			p.Add("%s: %s must be positive", from, d)
		}
	case "wait-for-table":
		if c.WaitForTable < 0 {
			p.Add("%s: %s must not be negative", from, c.WaitForTable)
		}
	case "shutdown-timeout":
		if c.ShutdownTimeout <= 0 {
			p.Add("%s: %s must be positive", from, c.ShutdownTimeout)
		}
	case "max-in-flight-bytes":
		if n, ok := sinks.ParseSize(c.MaxInFlight); !ok || n < 1<<20 || n > 1<<40 {
			p.Add("%s: %q is not a size from 1MiB to 1TiB (e.g. 128MiB)", from, c.MaxInFlight)
		}
	case "log-level":
		if _, err := logging.ParseLevel(c.LogLevel); err != nil {
			p.Add("%s: %v", from, err)
		}
	case "metrics-addr":
		if _, port, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			p.Add("%s: %q is not HOST:PORT (e.g. :9090)", from, c.MetricsAddr)
		} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			p.Add("%s: port %q is not a number from 0 to 65535", from, port)
		}
	case "metrics":
		switch c.Metrics {
		case "prometheus", "emf", "none":
		default:
			p.Add("%s: %q is not prometheus, emf or none", from, c.Metrics)
		}
	}
}

// validateNamespace: --checkpoint-namespace only names a part of a shared
// lease table.
func validateNamespace(c *runConfig, p *cli.Problems) {
	if c.CheckpointNS != "" && !strings.HasPrefix(c.Checkpoint, "dynamodb:") {
		p.Add("--checkpoint-namespace: applies to a dynamodb:// lease table shared by deployments; a file:// checkpoint is this worker's alone")
	}
}

// validateRun checks rules that involve several options.
func validateRun(c *runConfig, p *cli.Problems) {
	if len(c.Tables) == 0 && len(c.StreamARNs) == 0 && len(c.TablesTagged) == 0 {
		p.Add("--table, --stream-arn or --tables-tagged: name at least one table or stream ARN to archive, or a tag")
	}
	if len(c.Regions) > 0 && len(c.TablesTagged) > 0 {
		p.Add("--tables-tagged: reads the tagged tables of --region alone; --regions is for the replicas of each --table")
	}
	validateNamespace(c, p)
	validateLeaseTiming(c, p)
	if len(c.Regions) > 0 && len(c.Tables) == 0 {
		p.Add("--regions: reads the replicas of each --table, and no --table is given (a --stream-arn is read in the Region its ARN names)")
	}
	if len(c.Regions) > 0 && c.PerRegion {
		p.Add("--per-region: says another archiver reads each other Region, and --regions reads several from here; give one of them")
	}
	if c.Metrics == "emf" {
		for _, s := range append(slices.Clip(c.Sinks), c.DeadLetter) {
			if writesStdout(s) {
				p.Add("--metrics emf: writes its metrics to stdout, which %s already carries: use prometheus, or another sink", redact.URL(s))
			}
		}
	}
}

// writesStdout reports whether the sink URL s writes to standard output
// (stdout://): a command then keeps its summaries and metrics off stdout.
func writesStdout(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Scheme == "stdout"
}

// regionsAll is the --regions value that reads every replica's Region.
const regionsAll = "all"

// validateRegions checks --regions: Region names, each once, or all alone.
func validateRegions(rs []string, from string, p *cli.Problems) {
	seen := map[string]bool{}
	for _, r := range rs {
		switch {
		case r == regionsAll && len(rs) > 1:
			p.Add("%s: %q reads every replica's Region: give it alone, not beside %q", from, regionsAll, strings.Join(rs, ","))
			return
		case r == regionsAll:
		case !cli.IsRegion(r):
			p.Add("%s: %q is not a region name like eu-west-1 (or %s)", from, r, regionsAll)
		case seen[r]:
			p.Add("%s: %s is listed twice", from, r)
		}
		seen[r] = true
	}
}

// validateLeaseTiming checks --lease-renew against --lease-duration (run
// and sweep).
func validateLeaseTiming(c *runConfig, p *cli.Problems) {
	if c.LeaseRenew > 0 && c.LeaseDuration > 0 && c.LeaseRenew*3 > c.LeaseDuration {
		p.Add("--lease-renew: %s must be at most a third of --lease-duration %s, so a lease survives two failed renewals",
			c.LeaseRenew, c.LeaseDuration)
	}
}

// checkHTTPURL checks an http(s) endpoint URL. Its errors show the URL
// through redact.URL only: the endpoint may carry KEY:SECRET@.
func checkHTTPURL(s string) error {
	if !strings.Contains(s, "://") {
		// HOST:PORT, the commonest slip: url.Parse takes "localhost:8000"
		// for the scheme localhost, and refuses "127.0.0.1:8000".
		return fmt.Errorf("%q is not a URL: give the scheme, e.g. http://%s", redact.URL(s), redact.URL(s))
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%q is not a URL: %s", redact.URL(s), redact.ParseError(err))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%q: scheme must be http or https", redact.URL(s))
	}
	if u.Host == "" {
		return fmt.Errorf("%q: missing host", redact.URL(s))
	}
	return nil
}

func checkCheckpointURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%q is not a URL", redact.URL(s))
	}
	switch u.Scheme {
	case "file":
		if _, err := sinks.FilePath(u); err != nil {
			return fmt.Errorf("%q: %w", redact.URL(s), err)
		}
		return nil
	case "dynamodb":
		_, err := checkpoint.ParseDynamoURL(s)
		return err
	}
	return fmt.Errorf("%q: scheme must be file or dynamodb", redact.URL(s))
}

func checkSinkURL(s string) error {
	if _, err := url.Parse(s); err != nil {
		return fmt.Errorf("%q is not a URL", redact.URL(s))
	}
	// Every parameter, checked the way opening the sink will, but without
	// connecting: all problems are reported together at start-up.
	return sinks.Validate(s)
}

// printConfig writes the effective configuration as YAML that --config
// accepts, secrets masked, each line commented with the value's source.
func printConfig(w io.Writer, c *runConfig) error {
	return printOptions(w, runCommand, c, c.source)
}

// printOptions is printConfig for any command.
func printOptions[C any](w io.Writer, cmd command[C], c *C, source map[string]string) error {
	root := &yaml.Node{Kind: yaml.MappingNode}
	for _, o := range cmd.options {
		if o.noFile {
			continue
		}
		k := &yaml.Node{Kind: yaml.ScalarNode, Value: o.name}
		var v *yaml.Node
		switch val := o.get(c).(type) {
		case []string:
			v = &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
			if len(val) > 1 || o.secret {
				v.Style = 0
			}
			for _, s := range val {
				if o.secret {
					s = redact.URL(s)
				}
				v.Content = append(v.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: s})
			}
		case time.Duration:
			v = &yaml.Node{Kind: yaml.ScalarNode, Value: val.String()}
		case string:
			if o.secret {
				val = redact.URL(val)
			}
			v = &yaml.Node{Kind: yaml.ScalarNode, Value: val, Tag: "!!str"}
		default:
			v = &yaml.Node{Kind: yaml.ScalarNode, Value: fmt.Sprint(val)}
		}
		v.LineComment = source[o.name]
		root.Content = append(root.Content, k, v)
	}
	fmt.Fprintf(w, "# effective configuration of archiver %s (secrets masked); comments give each value's source\n", cmd.name)
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		return err
	}
	return enc.Close()
}

// envNames lists the ARCHIVER_* variables, for documentation and tests.
func envNames() []string {
	var out []string
	for _, o := range runOptions {
		out = append(out, o.env())
	}
	sort.Strings(out)
	return out
}
