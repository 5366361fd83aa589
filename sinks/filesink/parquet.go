package filesink

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/manifest"
	"github.com/ttl-archiver/archiver/parquetline"
	"github.com/ttl-archiver/archiver/sinks/internal/recorder"
	"github.com/ttl-archiver/archiver/sinks/internal/serial"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
)

// With format=parquet a file sink writes each batch's events as Parquet
// files (package parquetline), one per table, kind, Region, shard and
// creation hour of the batch, in the S3 sink's layout below DIR:
//
//	DIR/table=T/kind=K/dt=YYYY-MM-DD/hr=HH/REGION.SHARD-FIRSTSEQ-LASTSEQ.parquet
//
// A Parquet file cannot be appended to, so each file is whole: written to
// a temporary file beside it (.NAME.tmp), fsynced, renamed into place and
// its folder fsynced before the batch is acknowledged. The same batch
// written again (a re-delivery) lands on the same name and replaces the
// file with the same bytes (the encoding holds nothing but the events).
// Coverage manifests list each file whole: its size, the SHA-256 of all
// its bytes, and the first and last sequence number of its events.

// parquetBatch is one batch rendered for format=parquet: its files'
// names below DIR and bytes, the events refused (nil for none), and err
// when a group did not encode (the batch fails, to be retried).
type parquetBatch struct {
	files []parquetFile
	rej   error
	err   error
}

type parquetFile struct {
	rel  string
	data []byte
	// obj is the file as a manifest lists it (with manifests on).
	obj manifest.Object
}

// parquetGroup is the partition of the S3 layout an event falls in.
type parquetGroup struct {
	table  string
	kind   event.Kind
	region string
	shard  string
	hour   int64 // Unix hours
}

// renderParquet is the Prepare step with format=parquet: it groups the
// batch's events by partition, in order, and encodes each group, on the
// caller's goroutine.
func (s *Sink) renderParquet(b sinkapi.Batch) any {
	pb := &parquetBatch{}
	var order []parquetGroup
	groups := map[parquetGroup][]event.Event{}
	for j := range b.Events {
		e := &b.Events[j]
		if err := sinkapi.CheckTableName(e.Table); err != nil {
			pb.rej = sinkapi.AddRejected(pb.rej, j, fmt.Errorf("file sink: event %s: %w", e.EventID, err))
			continue
		}
		u := e.ApproximateCreationTime.Unix()
		g := parquetGroup{table: e.Table, kind: e.Kind, region: e.Region, shard: e.ShardID, hour: u / 3600}
		if u%3600 < 0 {
			g.hour-- // floor for times before 1970
		}
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], *e)
	}
	for _, g := range order {
		evs := groups[g]
		data, err := s.pq.Encode(evs)
		if err != nil {
			pb.err = fmt.Errorf("file sink: encoding %s: %w", g.rel(evs), err)
			return pb
		}
		f := parquetFile{rel: g.rel(evs), data: data}
		if s.rec != nil {
			sum := sha256.Sum256(data)
			f.obj = manifest.Object{Key: f.rel, Bytes: int64(len(data)), SHA256: hex.EncodeToString(sum[:]),
				First: evs[0].SequenceNumber, Last: evs[len(evs)-1].SequenceNumber}
		}
		pb.files = append(pb.files, f)
	}
	return pb
}

// rel is the group's file below DIR, named after the sequence numbers of
// its first and last events.
func (g parquetGroup) rel(evs []event.Event) string {
	h := time.Unix(g.hour*3600, 0).UTC()
	region := ""
	if g.region != "" {
		region = g.region + "."
	}
	return fmt.Sprintf("table=%s/kind=%s/dt=%s/hr=%s/%s%s-%s-%s%s", g.table, g.kind, h.Format("2006-01-02"), h.Format("15"),
		region, g.shard, evs[0].SequenceNumber, evs[len(evs)-1].SequenceNumber, parquetline.Ext)
}

// writeParquet is the worker's step with format=parquet: it makes each
// batch's files durable, in order; a batch fails with its first failed
// file.
func (s *Sink) writeParquet(reqs []serial.Req) []error {
	errs := make([]error, len(reqs))
	for i, r := range reqs {
		pb, _ := r.Prep.(*parquetBatch)
		if pb == nil {
			pb = s.renderParquet(r.Batch).(*parquetBatch)
		}
		errs[i] = cmp.Or(pb.err, pb.rej)
		if pb.err != nil {
			continue
		}
		for _, f := range pb.files {
			if err := s.root.replace(f.rel, f.data); err != nil {
				err = classifyFileError(err)
				s.log.Error("file sink write failed", zap.String("path", f.rel), zap.Error(err))
				errs[i] = err
				break
			}
			s.m.Bytes.Add(float64(len(f.data)))
			s.m.Objects.Inc()
			if s.rec != nil {
				s.rec.Track(recorder.ShardRef{Stream: cmp.Or(r.Batch.StreamARN, r.Batch.Events[0].StreamARN), Shard: cmp.Or(r.Batch.ShardID, r.Batch.Events[0].ShardID)}, f.obj)
			}
		}
	}
	return errs
}
