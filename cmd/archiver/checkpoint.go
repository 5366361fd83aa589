package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/checkpoint"
	"github.com/ttl-archiver/archiver/cmd/internal/cli"
	"github.com/ttl-archiver/archiver/internal/ops"
	"github.com/ttl-archiver/archiver/internal/redact"
	"github.com/ttl-archiver/archiver/lease"
	"github.com/ttl-archiver/archiver/shard"
	"github.com/ttl-archiver/archiver/sinks"
	"github.com/ttl-archiver/archiver/sweep/state"
)

// openedCheckpoint is what --checkpoint opened: the checkpoint store, and
// either the file it is (file://, one worker) or the leases that fence it
// (dynamodb://, many workers: they also assign the shards and hold the
// sweeper's lock), with a readiness probe of the lease table.
type openedCheckpoint struct {
	store  checkpoint.Store
	file   *checkpoint.FileStore // file:// only
	leases *lease.Store          // dynamodb:// only
	probe  ops.Check             // dynamodb:// only
	// worker names this worker: in its leases, and in the manifests its
	// sinks write.
	worker string
}

// workerName is --worker-id, or else lease.DefaultWorkerID (the ECS task
// ID, or HOSTNAME-PID), asked for at most 3 s.
func workerName(ctx context.Context, cfg *runConfig) string {
	if cfg.WorkerID != "" {
		return cfg.WorkerID
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return lease.DefaultWorkerID(wctx)
}

// assigner is the walker's shard.Assigner: the leases, or nil (one worker
// reads every shard).
func (o *openedCheckpoint) assigner() shard.Assigner {
	if o.leases == nil {
		return nil
	}
	return o.leases
}

// readyCheck is the readiness check of the leases (their renewals), or of
// the lease table when there are no leases to report; nil for a file.
func (o *openedCheckpoint) readyCheck() ops.Check {
	switch {
	case o.leases != nil:
		return func(context.Context) error { return o.leases.Ready() }
	case o.probe != nil:
		return ops.CachedCheck(o.probe, 10*time.Second)
	}
	return nil
}

// sweepState is where `archiver sweep` keeps its cursor and lock: in the
// checkpoint file, or in the lease table.
func (o *openedCheckpoint) sweepState() state.Store {
	if o.leases != nil {
		return state.NewDynamo(o.leases)
	}
	return state.NewFile(o.file)
}

// Close closes the checkpoint store and stops the leases (they are not
// released: see lease.Store.ReleaseAll).
func (o *openedCheckpoint) Close() error {
	err := o.store.Close()
	if o.leases != nil {
		err = errors.Join(err, o.leases.Close())
	}
	return err
}

// openCheckpoint opens the --checkpoint store; a dynamodb:// store comes
// with its leases (the shard assigner) and a readiness probe of its table
// for when the leases cannot report on their renewals themselves.
func openCheckpoint(ctx context.Context, cfg *runConfig, awsCfg aws.Config, d pipelineDeps) (*openedCheckpoint, error) {
	u, err := url.Parse(cfg.Checkpoint)
	if err != nil {
		return nil, cli.Usagef("archiver run: --checkpoint: %v", err)
	}
	switch u.Scheme {
	case "file":
		path, err := sinks.FilePath(u)
		if err != nil {
			return nil, cli.Usagef("archiver run: --checkpoint: %v", err)
		}
		fs, err := checkpoint.OpenFile(path)
		if err != nil {
			return nil, fmt.Errorf("--checkpoint: %w", err)
		}
		return &openedCheckpoint{store: fs, file: fs, worker: workerName(ctx, cfg)}, nil
	case "dynamodb":
		du, err := checkpoint.ParseDynamoURL(cfg.Checkpoint)
		if err != nil {
			return nil, cli.Usagef("archiver run: --checkpoint: %v", err)
		}
		// The lease table lives where the source table does unless the
		// URL says otherwise.
		endpoint := du.Endpoint
		if endpoint == "" {
			endpoint = cfg.Endpoint
		}
		c := awsCfg
		if du.Region != "" && du.Region != awsCfg.Region {
			c = awsCfg.Copy()
			c.Region = du.Region
		}
		client := dynamodb.NewFromConfig(c, func(o *dynamodb.Options) {
			if endpoint != "" {
				o.BaseEndpoint = aws.String(endpoint)
			}
		})
		worker := workerName(ctx, cfg)
		ls, err := lease.Open(ctx, lease.Options{
			Client:        client,
			Table:         du.Table,
			Namespace:     cfg.CheckpointNS,
			Create:        du.Create,
			WorkerID:      worker,
			LeaseDuration: cfg.LeaseDuration,
			RenewEvery:    cfg.LeaseRenew,
			Logger:        d.log.Named("checkpoint"),
			Registerer:    d.reg,
		})
		if err != nil {
			return nil, fmt.Errorf("--checkpoint %s: %w", redact.URL(cfg.Checkpoint), err)
		}
		d.log.Named("archiver").Info("lease store opened", zap.String("table", du.Table), zap.String("worker_id", worker),
			zap.String("namespace", cfg.CheckpointNS))
		probe := func(ctx context.Context) error {
			if _, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(du.Table)}); err != nil {
				return fmt.Errorf("lease table %s: %w", du.Table, err)
			}
			return nil
		}
		return &openedCheckpoint{store: checkpoint.NewDynamo(ls), leases: ls, probe: probe, worker: worker}, nil
	}
	return nil, cli.Usagef("archiver run: --checkpoint: scheme %q is not file or dynamodb", u.Scheme)
}
