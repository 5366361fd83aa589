package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/archive"
	"github.com/ttl-archiver/archiver/cmd/internal/cli"
	"github.com/ttl-archiver/archiver/internal/progress"
	"github.com/ttl-archiver/archiver/restore"
	"github.com/ttl-archiver/archiver/sinks"
)

// replayConfig is the effective configuration of `archiver replay`.
type replayConfig struct {
	sel   selectFlags
	Sink  string
	Batch int
	// MaxStreamIDs bounds the message IDs read from a JetStream destination.
	MaxStreamIDs int
	shared       runConfig // log-level, config, print-config
	source       map[string]string
}

var replayCommand = command[replayConfig]{
	name: "replay", options: replayOptions(), validate: validateReplayOption, check: func(*replayConfig, *cli.Problems) {},
}

func replayOptions() []option[replayConfig] {
	shared := func(name string) option[replayConfig] {
		return sharedRunOption(name, "", func(c *replayConfig) *runConfig { return &c.shared })
	}
	opts := selectOptions(func(c *replayConfig) *selectFlags { return &c.sel },
		"table whose archived events to replay (repeatable; default: every table in the archive)")
	return append(opts,
		option[replayConfig]{name: "sink", typ: "url", secret: true, usage: "where to send the events: any sink URL archiver run takes (nats://, s3://, file://, stdout://); its events= parameter (default expired) says which kinds it takes (required)",
			get: func(c *replayConfig) any { return c.Sink }, set: func(c *replayConfig, s string, _ []string, _ time.Duration) { c.Sink = s }},
		option[replayConfig]{name: "batch", kind: kindInt, def: "500", usage: "events per batch handed to the sink (a batch holds one shard's events)",
			get: func(c *replayConfig) any { return c.Batch }, set: func(c *replayConfig, s string, _ []string, _ time.Duration) { c.Batch, _ = strconv.Atoi(s) }},
		option[replayConfig]{name: "max-stream-ids", kind: kindInt, def: strconv.Itoa(restore.DefaultMaxStreamIDs), usage: "with a JetStream sink: how many message IDs of the stream to read, to send only what it lacks (about 100 bytes each); events it could not check are counted in the summary",
			get: func(c *replayConfig) any { return c.MaxStreamIDs }, set: func(c *replayConfig, s string, _ []string, _ time.Duration) { c.MaxStreamIDs, _ = strconv.Atoi(s) }},
		shared("log-level"),
		shared("config"),
		shared("print-config"),
	)
}

func validateReplayOption(c *replayConfig, o option[replayConfig], from string, p *cli.Problems) {
	if c.sel.validate(o.name, from, p) {
		return
	}
	switch o.name {
	case "sink":
		if c.Sink == "" {
			p.Add("%s: required: where to send the events (nats://, s3://, file://, stdout://)", from)
		} else if err := checkSinkURL(c.Sink); err != nil {
			p.Add("%s: %v", from, err)
		}
	case "batch":
		if c.Batch < 1 || c.Batch > 10000 {
			p.Add("%s: %d must be from 1 to 10000", from, c.Batch)
		}
	case "max-stream-ids":
		if c.MaxStreamIDs < 1 || c.MaxStreamIDs > 100_000_000 {
			p.Add("%s: %d must be from 1 to 100000000", from, c.MaxStreamIDs)
		}
	default:
		validateOption(&c.shared, runOption(o.name), from, p)
	}
}

// replayCmd is `archiver replay`: it sends archived events to a sink under
// their event IDs, waits for every acknowledgement and prints a summary.
func replayCmd(ctx context.Context, args []string, e env) error {
	return jobCmd(ctx, args, e, replayCommand, func(c *replayConfig) (*runConfig, *map[string]string) {
		return &c.shared, &c.source
	}, runReplay)
}

func runReplay(ctx context.Context, cfg *replayConfig, e env, j *job) error {
	log := j.log
	asel, rsel, err := cfg.sel.selection(time.Now())
	if err != nil {
		return cli.Usagef("archiver replay: %v", err)
	}
	a, err := archive.Open(ctx, cfg.sel.From, archive.Options{Logger: log.Named("archive"), OnBadLine: badLineLogger(log)})
	if err != nil {
		return err
	}
	j.arch = a
	sk, kinds, err := sinks.Open(ctx, cfg.Sink, sinks.Options{Logger: log.Named("sink"), Stdout: e.stdout, NoManifests: true})
	if err != nil {
		return err
	}
	stop := j.rep.Start(ctx)
	var stats archive.Stats
	started := time.Now()
	res, err := restore.Replay(ctx, restore.ReplayConfig{Sink: sk, Kinds: kinds, Select: rsel, BatchSize: cfg.Batch, Progress: j.rep,
		MaxStreamIDs: cfg.MaxStreamIDs},
		restore.ArchiveSource(a, asel, &stats))
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if cerr := sk.Close(cctx); err == nil && cerr != nil {
		err = fmt.Errorf("close %s: %w", sk.Name(), cerr)
	}
	stop()
	summary := e.stdout
	if writesStdout(cfg.Sink) {
		summary = e.stderr // stdout carries the events
	}
	if err == nil || res != (restore.ReplayResult{}) || stats.Objects > 0 {
		// A replay that failed before it did anything prints its error
		// alone, not a table of zeros first.
		printReplaySummary(summary, sk.Name(), res, stats, time.Since(started))
	}
	if res.NotWanted > 0 {
		log.Warn("selected events of kinds the sink does not take were not sent: list them in the sink URL's events= parameter (e.g. ?events=expired,deleted or ?events=all)",
			zap.Int64("events", res.NotWanted), zap.Any("sink_kinds", kinds))
	}
	if res.Unchecked > 0 {
		log.Warn("events older than the stream's duplicate window were sent without checking the stream for them (it holds more than --max-stream-ids messages): they may be duplicates; subscribers de-duplicate on Nats-Msg-Id",
			zap.Int64("events", res.Unchecked), zap.String("stream", res.Stream), zap.Int("ids_read", res.StreamIDs))
	}
	return err
}

func printReplaySummary(w io.Writer, sink string, r restore.ReplayResult, st archive.Stats, el time.Duration) {
	_ = progress.KV("replay to "+sink,
		"archive objects read", st.Objects,
		"archive lines", st.Lines,
		"duplicate lines", st.Duplicates,
		"undecodable lines", st.Undecodable,
		"events selected by the archive", r.Events,
		"left out by --key/--where", r.NotSelected,
		"not taken by the sink (events=)", r.NotWanted,
		"already in the stream, not sent", r.InStream,
		"sent unchecked, may be duplicates", r.Unchecked,
		"sent", r.Sent,
		"acknowledged", r.Acked,
		"failed", r.Failed,
		"elapsed", el.Round(time.Millisecond),
	).Print(w)
}
