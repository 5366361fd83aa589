package shard

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ttl-archiver/archiver/internal/promreg"
)

// metrics are the walker's Prometheus collectors. Labels are bounded: by
// table (and a small fixed set of error kinds), never by shard.
type metrics struct {
	records     *prometheus.CounterVec // archiver_shard_records_read_total{table}
	bytes       *prometheus.CounterVec // archiver_shard_bytes_read_total{table}
	calls       *prometheus.CounterVec // archiver_shard_getrecords_calls_total{table}
	errs        *prometheus.CounterVec // archiver_shard_api_errors_total{table,op,kind}
	throttles   *prometheus.CounterVec // archiver_shard_throttles_total{table}
	gaps        *prometheus.CounterVec // archiver_shard_trimmed_gaps_total{table}
	age         *prometheus.GaugeVec   // archiver_shard_iterator_age_seconds{table}
	active      *prometheus.GaugeVec   // archiver_shards_active{table}
	ended       *prometheus.CounterVec // archiver_shards_ended_total{table}
	discoveries *prometheus.CounterVec // archiver_shard_discoveries_total{table}
	failures    *prometheus.CounterVec // archiver_shard_reader_failures_total{table}
	undecodable *prometheus.CounterVec // archiver_shard_undecodable_records_total{table}
	probes      *prometheus.CounterVec // archiver_shard_trim_probes_total{table,result}

	mu   sync.Mutex
	ages map[string]map[string]float64 // table → reader key → seconds
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{ages: map[string]map[string]float64{}}
	m.records = promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "archiver_shard_records_read_total", Help: "Stream records read by GetRecords, by table.",
	}, []string{"table"}))
	m.bytes = promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "archiver_shard_bytes_read_total", Help: "Approximate bytes (record SizeBytes) read by GetRecords, by table.",
	}, []string{"table"}))
	m.calls = promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "archiver_shard_getrecords_calls_total", Help: "GetRecords calls, by table.",
	}, []string{"table"}))
	m.errs = promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "archiver_shard_api_errors_total", Help: "Streams API errors, by table, operation and kind (throttled, expired_iterator, trimmed, not_found, rejected, other).",
	}, []string{"table", "op", "kind"}))
	m.throttles = promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "archiver_shard_throttles_total", Help: "Throttled Streams API calls (after the SDK's own retries), by table.",
	}, []string{"table"}))
	m.gaps = promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "archiver_shard_trimmed_gaps_total", Help: "Times a shard's next records had been trimmed from the stream before they were read (data lost upstream), by table.",
	}, []string{"table"}))
	m.age = promreg.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "archiver_shard_iterator_age_seconds", Help: "Largest age (now minus ApproximateCreationDateTime) of the last record read, over the table's active shards; 0 when caught up.",
	}, []string{"table"}))
	m.active = promreg.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "archiver_shards_active", Help: "Shards being read now, by table.",
	}, []string{"table"}))
	m.ended = promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "archiver_shards_ended_total", Help: "Closed shards read to their end and finished, by table.",
	}, []string{"table"}))
	m.discoveries = promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "archiver_shard_discoveries_total", Help: "Stream descriptions (DescribeStream paged to the end), by table.",
	}, []string{"table"}))
	m.failures = promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "archiver_shard_reader_failures_total", Help: "Shard readers that failed (Process refused a batch, e.g. a malformed record, or the Streams API kept failing) and will restart from the stored position, by table. Rising without end means a shard is stuck.",
	}, []string{"table"}))
	m.undecodable = promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "archiver_shard_undecodable_records_total", Help: "Stream records that neither the fast decoder nor the SDK's could read, handed to the consumer raw (dead-lettered with --dead-letter; without one their shard stops at them), by table.",
	}, []string{"table"}))
	m.probes = promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "archiver_shard_trim_probes_total", Help: "GetShardIterator calls AT a shard's StartingSequenceNumber made when a shard is first read from TRIM_HORIZON, to learn whether its first records were trimmed before they were read, by table and result (trimmed, whole, failed: unknown, taken for whole).",
	}, []string{"table", "result"}))
	return m
}

// setAge records the age of the last record read by one reader and updates
// the table's gauge to the largest age over its readers.
func (m *metrics) setAge(table, key string, age time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.ages[table]
	if t == nil {
		t = map[string]float64{}
		m.ages[table] = t
	}
	if age < 0 {
		age = 0
	}
	t[key] = age.Seconds()
	m.publishAge(table)
}

// dropAge forgets a reader that stopped.
func (m *metrics) dropAge(table, key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.ages[table], key)
	m.publishAge(table)
}

func (m *metrics) publishAge(table string) {
	var max float64
	for _, a := range m.ages[table] {
		if a > max {
			max = a
		}
	}
	m.age.WithLabelValues(table).Set(max)
}
