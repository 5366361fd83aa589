-- The Parquet archive as one DuckDB view: the table of ../parquet.sql,
-- read from a local copy of the archive (aws s3 sync s3://BUCKET/PREFIX/
-- ARCHIVE_DIR). Replace ARCHIVE_DIR with that directory. Columns, their
-- types and the partition columns are those of ../parquet.sql (the test
-- in deploy/ checks it); DuckDB reads the files' own schema, so this view
-- only orders the columns and takes the partitions from the paths.
CREATE OR REPLACE VIEW ttl_archive_parquet AS
SELECT
  item, keys, key, old_image, event_id, event_name, sequence_number,
  shard_id, stream_arn, region, approximate_creation_time, deletion_time,
  size_bytes, ttl_attribute, ttl_value, ttl_time, ttl_lag_seconds,
  deleted_by, image, dead_letter_reason, dead_letter_sink,
  dead_letter_error, dead_letter_attempts, dead_letter_first_failure,
  dead_letter_record,
  "table", kind, dt, hr
FROM read_parquet(
  'ARCHIVE_DIR/table=*/kind=*/dt=*/hr=*/*.parquet',
  hive_partitioning = true,
  hive_types = {'table': 'VARCHAR', 'kind': 'VARCHAR', 'dt': 'VARCHAR', 'hr': 'VARCHAR'},
  union_by_name = true
);
