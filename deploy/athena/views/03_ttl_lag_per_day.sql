-- ttl_lag_per_day: how long after their TTL items were deleted, per table
-- and day: percentiles and maximum of Metadata.ttlLagSeconds over the
-- expired items whose TTL time is known (keys-only events may lack it).
CREATE OR REPLACE VIEW ttl_lag_per_day AS
SELECT
  table_name,
  dt,
  count(ttl_lag_seconds) AS expiries_with_ttl,
  approx_percentile(ttl_lag_seconds, 0.5) AS lag_p50_seconds,
  approx_percentile(ttl_lag_seconds, 0.9) AS lag_p90_seconds,
  approx_percentile(ttl_lag_seconds, 0.99) AS lag_p99_seconds,
  max(ttl_lag_seconds) AS lag_max_seconds
FROM archive_events
WHERE kind = 'expired'
GROUP BY table_name, dt
