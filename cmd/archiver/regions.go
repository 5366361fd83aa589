package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/consumer"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/shard"
)

// regionClients are the DynamoDB and Streams clients of one Region, and
// what run reads there.
type regionClients struct {
	name    string
	ddb     *dynamodb.Client
	streams *dynamodbstreams.Client
	tables  []string // the tables read in this Region
	arns    []string // the stream ARNs naming this Region
}

// sources is what run reads, Region by Region: the first is --region's
// (its clients look up TTL attributes), then the others in the order
// --regions (or the tables' replicas) name them; and which tables are
// global.
type sources struct {
	regions      []*regionClients
	globalTables []string
	// tagged lists the tables of --tables-tagged; nil without it.
	tagged *shard.TaggedTables
}

// home is --region's clients.
func (s *sources) home() *regionClients { return s.regions[0] }

// shardRegions is the walker's Options.Regions: nil when run reads one
// Region only.
func (s *sources) shardRegions() []shard.Region {
	if len(s.regions) == 1 {
		return nil
	}
	out := make([]shard.Region, 0, len(s.regions))
	for _, r := range s.regions {
		// Never nil: a Region whose list is nil reads every table.
		tables := append(make([]string, 0, len(r.tables)), r.tables...)
		out = append(out, shard.Region{Name: r.name, Streams: r.streams, Tables: r.ddb, TableNames: tables})
	}
	return out
}

// region returns the clients of Region name, made on first use.
func (s *sources) region(name string, awsCfg aws.Config, cfg *runConfig) *regionClients {
	for _, r := range s.regions {
		if r.name == name {
			return r
		}
	}
	c := awsCfg.Copy()
	c.Region = name
	ddb, streams := sourceClients(c, cfg)
	r := &regionClients{name: name, ddb: ddb, streams: streams}
	s.regions = append(s.regions, r)
	return r
}

// planSources decides where run reads and proves it can (see
// checkRunSources, once per Region): every --table in each Region of
// --regions (all: each Region its replicas are in, as --region's
// description lists them; none: --region alone), every --stream-arn in the
// Region its ARN names. Then it judges each global table with
// shard.GlobalCheck: it logs the table's Regions, those read and how they
// are classified, WARNs where expiries would be left to archivers that
// may not exist, and refuses what would archive an expiry more than once
// or never.
func planSources(ctx context.Context, cfg *runConfig, awsCfg aws.Config, ddb *dynamodb.Client, streams *dynamodbstreams.Client,
	routes []consumer.Route, log *zap.Logger) (*sources, error) {
	srcs := &sources{regions: []*regionClients{{name: awsCfg.Region, ddb: ddb, streams: streams}}}
	for _, a := range cfg.StreamARNs {
		r := srcs.region(cmp.Or(event.RegionOf(a), awsCfg.Region), awsCfg, cfg)
		r.arns = append(r.arns, a)
	}
	home, err := checkRunSources(ctx, cfg, srcs.home(), cfg.Tables, routes, log)
	if err != nil {
		return nil, err
	}
	read := tableRegions(cfg, awsCfg.Region, home)
	for _, t := range cfg.Tables {
		for _, name := range read[t] {
			r := srcs.region(name, awsCfg, cfg)
			r.tables = append(r.tables, t)
		}
	}
	for _, r := range srcs.regions[1:] {
		if _, err := checkRunSources(ctx, cfg, r, r.tables, routes, log); err != nil {
			return nil, err
		}
	}
	for _, s := range home {
		if s.Table != "" && s.Global.IsGlobal() {
			srcs.globalTables = append(srcs.globalTables, s.Table)
		}
	}
	return srcs, judgeGlobalTables(cfg, home, read, routes, log)
}

// tableRegions is, for each table, the Regions it is read in.
func tableRegions(cfg *runConfig, homeRegion string, home []shard.Source) map[string][]string {
	out := map[string][]string{}
	for _, s := range home {
		if s.Table == "" {
			continue
		}
		switch {
		case len(cfg.Regions) == 0:
			out[s.Table] = []string{homeRegion}
		case cfg.Regions[0] == regionsAll && s.Global.IsGlobal():
			out[s.Table] = s.Global.Regions
		case cfg.Regions[0] == regionsAll:
			out[s.Table] = []string{homeRegion}
		default:
			out[s.Table] = cfg.Regions
		}
	}
	return out
}

// judgeGlobalTables logs what shard.GlobalCheck finds about each table and
// returns the first refusal.
func judgeGlobalTables(cfg *runConfig, home []shard.Source, read map[string][]string, routes []consumer.Route, log *zap.Logger) error {
	when, _ := event.ParseExpiredWhen(cfg.ExpiredWhen) // validated with the configuration
	var wantsExpired, wantsDeleted bool
	for _, r := range routes {
		wantsExpired = wantsExpired || slices.Contains(kindsOrDefault(r.Kinds), event.Expired)
		wantsDeleted = wantsDeleted || slices.Contains(r.Kinds, event.Deleted)
	}
	var errs []error
	for _, s := range home {
		if s.Table == "" {
			continue
		}
		c := shard.GlobalCheck{Read: read[s.Table], PerRegion: cfg.PerRegion, PastTTL: when == event.ExpiredWhenPastTTL,
			WantsExpired: wantsExpired, WantsDeleted: wantsDeleted}
		v, err := c.Check(s)
		for _, m := range v.Info {
			log.Info(m, zap.String("table", s.Table))
		}
		for _, m := range v.Warn {
			log.Warn(m, zap.String("table", s.Table))
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// kindsOrDefault is a route's kinds, where none means expired alone.
func kindsOrDefault(k []event.Kind) []event.Kind {
	if len(k) == 0 {
		return []event.Kind{event.Expired}
	}
	return k
}

// describeRegions is the readiness check's view of srcs: each Region's
// tables answer DescribeTable with a stream, each stream ARN answers
// DescribeStream.
func describeRegions(ctx context.Context, srcs *sources) error {
	var errs []error
	for _, r := range srcs.regions {
		for _, t := range r.tables {
			out, err := r.ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(t)})
			if err != nil {
				errs = append(errs, fmt.Errorf("table %s in %s: %w", t, r.name, err))
				continue
			}
			if out.Table == nil || aws.ToString(out.Table.LatestStreamArn) == "" {
				errs = append(errs, fmt.Errorf("table %s in %s: no stream enabled", t, r.name))
			}
		}
		for _, a := range r.arns {
			if _, err := r.streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(a), Limit: aws.Int32(1)}); err != nil {
				errs = append(errs, fmt.Errorf("stream %s: %w", a, err))
			}
		}
	}
	return errors.Join(errs...)
}
