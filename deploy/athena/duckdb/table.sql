-- The archive as one DuckDB view: the table of ../table.sql, read from a
-- local copy of the archive (aws s3 sync s3://BUCKET/PREFIX/ ARCHIVE_DIR).
-- Replace ARCHIVE_DIR with that directory. Columns, their types and the
-- partition columns are those of ../table.sql (the test in deploy/ checks
-- it); Item and OldImage are JSON text, Keys a map, Metadata a struct.
-- DuckDB's JSON reader matches field names case-sensitively, so they are
-- spelled as the archive line spells them (Athena's SerDe ignores case);
-- SQL names are case-insensitive in both, so queries read the same.
CREATE OR REPLACE VIEW ttl_archive AS
SELECT
  Item AS item,
  Keys AS keys,
  OldImage AS oldimage,
  Metadata AS metadata,
  "table", kind, dt, hr
FROM read_json(
  'ARCHIVE_DIR/table=*/kind=*/dt=*/hr=*/*.jsonl.gz',
  format = 'newline_delimited',
  compression = 'gzip',
  hive_partitioning = true,
  hive_types = {'table': 'VARCHAR', 'kind': 'VARCHAR', 'dt': 'VARCHAR', 'hr': 'VARCHAR'},
  columns = {
    Item: 'JSON',
    Keys: 'MAP(VARCHAR, STRUCT(S VARCHAR, N VARCHAR, B VARCHAR))',
    OldImage: 'JSON',
    Metadata: 'STRUCT(
      kind VARCHAR,
      "table" VARCHAR,
      eventID VARCHAR,
      eventName VARCHAR,
      sequenceNumber VARCHAR,
      shardId VARCHAR,
      streamArn VARCHAR,
      region VARCHAR,
      approximateCreationDateTime VARCHAR,
      deletionTime VARCHAR,
      sizeBytes BIGINT,
      ttlAttribute VARCHAR,
      ttlValue VARCHAR,
      ttlTime VARCHAR,
      ttlLagSeconds DOUBLE,
      deletedBy VARCHAR,
      image VARCHAR
    )'
  }
);
