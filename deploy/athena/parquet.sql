-- The archive's Parquet objects (format=parquet on the S3 sink) as one
-- Athena table (Athena engine v3). Replace s3://BUCKET/PREFIX/ (twice)
-- with the archiver's s3:// sink URL and 2024-01-01 with the archive's
-- first day, then run this statement alone. An archive written with
-- NDJSON and then Parquet is both tables over the same prefix: each reads
-- its own objects (this one *.parquet, ttl_archive the .jsonl objects).
--
-- One row per event, the archive line's fields as typed columns
-- (docs/MESSAGES.md, "Parquet archives"): item, keys and old_image are the
-- line's DynamoDB JSON text, exactly (json_extract_scalar(item,
-- '$.plan.S')); key maps each key attribute to its value as text
-- (key['pk']: a string as it is, a number's digits, binary as base64);
-- the times are timestamps (UTC), ttl_lag_seconds a decimal. The files
-- also hold kind and table, which are this table's partitions here.
CREATE EXTERNAL TABLE IF NOT EXISTS ttl_archive_parquet (
  item string,
  keys string,
  key map<string, string>,
  old_image string,
  event_id string,
  event_name string,
  sequence_number string,
  shard_id string,
  stream_arn string,
  region string,
  approximate_creation_time timestamp,
  deletion_time timestamp,
  size_bytes bigint,
  ttl_attribute string,
  ttl_value string,
  ttl_time timestamp,
  ttl_lag_seconds decimal(18,9),
  deleted_by string,
  image string,
  dead_letter_reason string,
  dead_letter_sink string,
  dead_letter_error string,
  dead_letter_attempts bigint,
  dead_letter_first_failure timestamp,
  dead_letter_record string
)
PARTITIONED BY (`table` string, kind string, dt string, hr string)
STORED AS PARQUET
LOCATION 's3://BUCKET/PREFIX/'
TBLPROPERTIES (
  'projection.enabled' = 'true',
  'projection.table.type' = 'injected',
  'projection.kind.type' = 'enum',
  'projection.kind.values' = 'expired,deleted,inserted,modified',
  'projection.dt.type' = 'date',
  'projection.dt.format' = 'yyyy-MM-dd',
  'projection.dt.range' = '2024-01-01,NOW',
  'projection.dt.interval' = '1',
  'projection.dt.interval.unit' = 'DAYS',
  'projection.hr.type' = 'enum',
  'projection.hr.values' = '00,01,02,03,04,05,06,07,08,09,10,11,12,13,14,15,16,17,18,19,20,21,22,23',
  'storage.location.template' = 's3://BUCKET/PREFIX/table=${table}/kind=${kind}/dt=${dt}/hr=${hr}/'
)
