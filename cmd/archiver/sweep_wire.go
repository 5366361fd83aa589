package main

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ttl-archiver/archiver/sweep"
)

// newTableSweeper builds the table's sweeper from the configuration.
func newTableSweeper(cfg *sweepConfig, client *dynamodb.Client, cursors sweep.CursorStore, d sweepDeps) (sweeperRunner, error) {
	return sweep.New(sweep.Config{
		Client:              client,
		Table:               cfg.Table,
		Index:               cfg.Index,
		WindowAttribute:     cfg.WindowAttribute,
		TTLAttribute:        cfg.TTLAttribute,
		Window:              cfg.Window,
		WindowShards:        cfg.WindowShards,
		Interval:            cfg.Interval,
		Grace:               cfg.Grace,
		Lookback:            cfg.Lookback,
		MaxDeletesPerSecond: cfg.MaxDeletesPerSecond,
		Cursor:              cursors,
		Logger:              d.log.Named("sweep"),
		Registerer:          d.reg,
	})
}
