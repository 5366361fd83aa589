package consumer

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ttl-archiver/archiver/internal/promreg"
)

// metrics are the consumer's Prometheus collectors.
type metrics struct {
	events            *prometheus.CounterVec   // archiver_events_total{table,kind}
	sinkWrites        *prometheus.CounterVec   // archiver_sink_writes_total{sink}
	sinkFailures      *prometheus.CounterVec   // archiver_sink_failures_total{sink}
	sinkLatency       *prometheus.HistogramVec // archiver_sink_latency_seconds{sink}
	lagRecords        *prometheus.GaugeVec     // archiver_checkpoint_lag_records{table,shard}
	lagSeconds        *prometheus.GaugeVec     // archiver_checkpoint_lag_seconds{table,shard}
	ttlLag            *prometheus.HistogramVec // archiver_ttl_lag_seconds{table}
	checkpointSaves   *prometheus.CounterVec   // archiver_checkpoint_saves_total{table}
	checkpointErrors  *prometheus.CounterVec   // archiver_checkpoint_save_failures_total{table}
	ttlLookupFailures *prometheus.CounterVec   // archiver_ttl_lookup_failures_total{table}
	inflightBytes     *prometheus.GaugeVec     // archiver_consumer_inflight_bytes{table}
	starvedFlushes    prometheus.Counter       // archiver_consumer_starved_flushes_total

	oldestUnacked      *prometheus.GaugeVec   // archiver_oldest_unacked_age_seconds{table,shard}
	deadLettered       *prometheus.CounterVec // archiver_dead_lettered_records_total{table,sink,reason}
	deadLetterFailures *prometheus.CounterVec // archiver_dead_letter_failures_total{table}
	shardsStuck        *prometheus.GaugeVec   // archiver_shards_stuck{table}
	nearTrim           *prometheus.GaugeVec   // archiver_records_near_trim{table}

	ttlPassedUserDeletes *prometheus.CounterVec // archiver_ttl_passed_user_deletes_total{table}
	replicatedTTLDeletes *prometheus.CounterVec // archiver_replicated_ttl_deletes_total{table}

	rangesRecorded      *prometheus.CounterVec // archiver_ranges_recorded_total{table,sink}
	rangeRecordFailures *prometheus.CounterVec // archiver_range_record_failures_total{table,sink}
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{}
	m.events = promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "archiver_events_total", Help: "Stream records decoded and classified, by table and kind (expired, deleted, inserted, modified).",
	}, []string{"table", "kind"}))
	m.sinkWrites = promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "archiver_sink_writes_total", Help: "Batches a sink acknowledged as durable, by sink.",
	}, []string{"sink"}))
	m.sinkFailures = promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "archiver_sink_failures_total", Help: "Batches a sink refused or acknowledged with an error (each is retried), by sink.",
	}, []string{"sink"}))
	m.sinkLatency = promreg.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "archiver_sink_latency_seconds", Help: "Time from handing a batch to a sink to its acknowledgement, by sink.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
	}, []string{"sink"}))
	m.lagRecords = promreg.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "archiver_checkpoint_lag_records", Help: "Records of an active shard handed to the consumer but not yet covered by a saved checkpoint.",
	}, []string{"table", "shard"}))
	m.lagSeconds = promreg.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "archiver_checkpoint_lag_seconds", Help: "Age (by ApproximateCreationDateTime) of the oldest record of an active shard not yet covered by a saved checkpoint; 0 when none.",
	}, []string{"table", "shard"}))
	m.ttlLag = promreg.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "archiver_ttl_lag_seconds", Help: "For expired items: deletion time (the record's ApproximateCreationDateTime) minus the TTL value, by table.",
		Buckets: []float64{1, 10, 60, 300, 900, 1800, 3600, 2 * 3600, 6 * 3600, 12 * 3600, 24 * 3600, 48 * 3600, 72 * 3600},
	}, []string{"table"}))
	m.checkpointSaves = promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "archiver_checkpoint_saves_total", Help: "Checkpoints saved, by table.",
	}, []string{"table"}))
	m.checkpointErrors = promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "archiver_checkpoint_save_failures_total", Help: "Checkpoint saves that failed (retried at the next interval), by table.",
	}, []string{"table"}))
	m.ttlLookupFailures = promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "archiver_ttl_lookup_failures_total", Help: "DescribeTimeToLive calls that failed, by table.",
	}, []string{"table"}))
	m.ttlPassedUserDeletes = promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "archiver_ttl_passed_user_deletes_total", Help: "Under --expired-when service: REMOVE records without DynamoDB's TTL identity made after the item's TTL had passed (a sweeper's deletes), archived as deleted; --expired-when past-ttl would archive them as expired. On a global table they count in archiver_replicated_ttl_deletes_total instead. By table.",
	}, []string{"table"}))
	m.replicatedTTLDeletes = promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "archiver_replicated_ttl_deletes_total", Help: "Under --expired-when service, on a global table: REMOVE records without DynamoDB's TTL identity made after the item's TTL had passed, mostly the expiries another Region's TTL performed (archived from that Region's stream), archived as deleted. By table.",
	}, []string{"table"}))
	m.inflightBytes = promreg.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "archiver_consumer_inflight_bytes", Help: "Estimated memory of records handed to the consumer and not yet acknowledged by every sink, by table.",
	}, []string{"table"}))
	m.starvedFlushes = promreg.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "archiver_consumer_starved_flushes_total", Help: "Times every sink was asked to flush because a shard waited for in-flight budget.",
	}))
	m.oldestUnacked = promreg.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "archiver_oldest_unacked_age_seconds", Help: "Age (now minus ApproximateCreationDateTime) of the oldest record of an active shard not yet acknowledged by every sink that wanted it (or the dead-letter sink); 0 when none.",
	}, []string{"table", "shard"}))
	m.deadLettered = promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "archiver_dead_lettered_records_total", Help: "Records the dead-letter sink acknowledged, by table, the sink that failed them (\"decode\" for records that could not be decoded) and reason (permanent, retry_for, undecodable).",
	}, []string{"table", "sink", "reason"}))
	m.deadLetterFailures = promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "archiver_dead_letter_failures_total", Help: "Batches the dead-letter sink failed (each is retried), by table.",
	}, []string{"table"}))
	m.shardsStuck = promreg.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "archiver_shards_stuck", Help: "Shards whose oldest unacknowledged batch a sink has kept failing for longer than the stuck threshold (1 min by default), or whose reader has failed 3 times in a row at one position over that long (a record that cannot be decoded and no dead-letter sink), by table.",
	}, []string{"table"}))
	m.nearTrim = promreg.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "archiver_records_near_trim", Help: "Shards whose oldest unacknowledged record is within the trim warning (2 h by default) of the stream's 24 h retention: records about to be lost, by table.",
	}, []string{"table"}))
	m.rangesRecorded = promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "archiver_ranges_recorded_total", Help: "Ranges of a shard a recording sink (S3, file) made durable in its archive (a coverage manifest) before the shard's checkpoint passed them, by table and sink.",
	}, []string{"table", "sink"}))
	m.rangeRecordFailures = promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "archiver_range_record_failures_total", Help: "Ranges a recording sink failed to record; the shard's checkpoint waits and the range is recorded again at the end of the checkpoint interval, by table and sink.",
	}, []string{"table", "sink"}))
	return m
}
