package main

import (
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ttl-archiver/archiver/sweep"
)

// newTableSweeper builds the table's sweeper from the configuration.
func newTableSweeper(cfg *sweepConfig, client *dynamodb.Client, cursors sweep.CursorStore, d sweepDeps) (sweep.Runner, error) {
	return sweep.New(sweep.Config{
		Client:               client,
		Table:                cfg.Table,
		Index:                cfg.Index,
		WindowAttribute:      cfg.WindowAttribute,
		TTLAttribute:         cfg.TTLAttribute,
		TTLAttributeOverride: cfg.TTLOverride,
		Window:               cfg.Window,
		WindowShards:         cfg.WindowShards,
		Interval:             cfg.Interval,
		Grace:                cfg.Grace,
		Lookback:             cfg.Lookback,
		MaxDeletesPerSecond:  cfg.MaxDeletesPerSecond,
		MaxClockSkew:         clockSkewBound(cfg.MaxClockSkew),
		Cursor:               cursors,
		Logger:               d.log.Named("sweep"),
		Registerer:           d.reg,
	})
}

// clockSkewBound is sweep.Config.MaxClockSkew for --max-clock-skew, whose
// 0 turns the check off.
func clockSkewBound(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
