-- expiries_per_day: expired items per table and day (UTC, the day of the
-- deletion), and who deleted them: DynamoDB's TTL process or another
-- principal (a sweeper, under --expired-when past-ttl).
CREATE OR REPLACE VIEW expiries_per_day AS
SELECT
  table_name,
  dt,
  count(*) AS expiries,
  sum(CASE WHEN deleted_by = 'dynamodb-ttl' THEN 1 ELSE 0 END) AS by_dynamodb_ttl,
  sum(CASE WHEN deleted_by = 'dynamodb-ttl' THEN 0 ELSE 1 END) AS by_other
FROM archive_events
WHERE kind = 'expired'
GROUP BY table_name, dt
