package checkpoint

// Test-only access for the external multi-worker tests (package
// checkpoint_test, which imports the consumer).

// Crash simulates a killed process: renewals and heartbeats stop, nothing
// more is written, and every assignment's context is cancelled.
func (s *DynamoStore) Crash() { s.crash() }

// HeldShards lists the shards of the stream this worker holds and reads
// (leases being handed off or stopped excluded).
func (s *DynamoStore) HeldShards(stream string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k, l := range s.leases {
		if k.stream == stream && !l.stopping {
			out = append(out, k.shard)
		}
	}
	return out
}
