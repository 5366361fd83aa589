package main

import (
	"context"
	"errors"

	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/cmd/internal/cli"
	"github.com/ttl-archiver/archiver/consumer"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/shard"
)

// newTagSource is the lister of --tables-tagged (nil without it): the
// tables of --region carrying every tag, refusing those whose stream
// lacks the old image a sink needs (unless --allow-keys-only).
func newTagSource(cfg *runConfig, r *regionClients, routes []consumer.Route, d pipelineDeps) (*shard.TaggedTables, error) {
	if len(cfg.TablesTagged) == 0 {
		return nil, nil
	}
	tags := make([]shard.Tag, len(cfg.TablesTagged))
	for i, s := range cfg.TablesTagged {
		tg, err := shard.ParseTag(s)
		if err != nil {
			return nil, cli.Usagef("archiver run: --tables-tagged: %v", err) // validated with the configuration
		}
		tags[i] = tg
	}
	needOld := false
	for _, rt := range routes {
		needOld = needOld || event.NeedsOldImage(rt.Kinds)
	}
	tt, err := shard.NewTaggedTables(shard.TaggedOptions{
		Client: r.ddb, Tags: tags, NeedOldImage: needOld, AllowKeysOnly: cfg.AllowKeysOnly,
		Logger: d.log, Registerer: d.reg,
	})
	if err != nil {
		return nil, err
	}
	d.log.Named("archiver").Info("archiving the tables carrying every tag given", zap.Strings("tags", cfg.TablesTagged),
		zap.Duration("refresh", cfg.TablesRefresh))
	return tt, nil
}

// tableSource is the walker's Options.TableSource: the tag lister, or
// nil (not a nil pointer in an interface) without one.
func (s *sources) tableSource() shard.TableSource {
	if s.tagged == nil {
		return nil
	}
	return s.tagged
}

// taggedCheck is /readyz's "tables" check: failing, with the lister's
// words, while no tagged table is archived.
func taggedCheck(tt *shard.TaggedTables) func(context.Context) error {
	return func(context.Context) error {
		if w := tt.Waiting(); w != "" {
			return errors.New(w)
		}
		return nil
	}
}
