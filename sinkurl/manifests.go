package sinkurl

import (
	"time"
)

// ManifestConfig is how an S3 or file sink records coverage manifests
// (see sinks.S3Sink.Record): the URL parameters manifests=,
// manifest-objects= and manifest-interval=.
type ManifestConfig struct {
	// Off (manifests=false) turns recording off: the sink tracks no
	// objects, the sinks' Open returns it without Record and RecordDue,
	// and its own Record fails with sinks.ErrNotRecording.
	Off bool
	// Objects: a shard's range is due once the sink made this many
	// objects holding its events durable since its last manifest
	// (default 100).
	Objects int
	// Interval: a shard's range is due once this long passed since its
	// last manifest, or since the sink first heard of the shard when none
	// was written yet (default 10m).
	Interval time.Duration
	// Writer names the worker in the manifests ("" for none).
	Writer string
}

// The defaults of [ManifestConfig]: a manifest per 100 objects of a shard
// adds 1 % to its S3 PUTs (on top of one per shard at each stop, shard
// end or interval), and a crash re-reads at most about 10 minutes, inside
// JetStream's 20-minute duplicate window.
const (
	DefaultManifestObjects  = 100
	DefaultManifestInterval = 10 * time.Minute
)

// WithDefaults fills the zero Objects and Interval with the defaults.
func (c ManifestConfig) WithDefaults() ManifestConfig {
	if c.Objects <= 0 {
		c.Objects = DefaultManifestObjects
	}
	if c.Interval <= 0 {
		c.Interval = DefaultManifestInterval
	}
	return c
}

// ParseManifests reads manifests=, manifest-objects= and
// manifest-interval=; the last two make no sense with manifests=false.
func ParseManifests(p *Params) (ManifestConfig, error) {
	on, err := p.Bool("manifests", true)
	if err != nil {
		return ManifestConfig{}, err
	}
	n, err := p.Int("manifest-objects", DefaultManifestObjects, 1, 1_000_000)
	if err != nil {
		return ManifestConfig{}, err
	}
	d, err := p.Duration("manifest-interval", DefaultManifestInterval, time.Second, 6*time.Hour)
	if err != nil {
		return ManifestConfig{}, err
	}
	if !on {
		for _, name := range []string{"manifest-objects", "manifest-interval"} {
			if p.Given(name) {
				return ManifestConfig{}, p.Fail(name, "has no effect with manifests=false")
			}
		}
		return ManifestConfig{Off: true}, nil
	}
	return ManifestConfig{Objects: int(n), Interval: d}, nil
}
