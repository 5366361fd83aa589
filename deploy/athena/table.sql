-- The archive as one Athena table (Athena engine v3). Replace
-- s3://BUCKET/PREFIX/ (twice) with the archiver's s3:// sink URL and
-- 2024-01-01 with the archive's first day, then run this statement alone.
-- deploy/terraform/athena.tf creates the same table in Glue.
--
-- One row per archive line (see README, "The archive format"). Item,
-- Keys and OldImage keep DynamoDB JSON as written: Item and OldImage as
-- JSON text (read them with json_extract_scalar, or feed Item to PutItem),
-- Keys as a map from key attribute to its typed value, so
-- keys['pk'].s is the string key pk. Metadata is a struct.
--
-- Partitions are projected, never crawled or added: `table` is injected
-- (every query names its tables: WHERE "table" = 'T' or IN (...)), kind
-- and hr are enums, dt is a date from 2024-01-01 until today.
CREATE EXTERNAL TABLE IF NOT EXISTS ttl_archive (
  item string,
  keys map<string, struct<s: string, n: string, b: string>>,
  oldimage string,
  metadata struct<
    kind: string,
    `table`: string,
    eventid: string,
    eventname: string,
    sequencenumber: string,
    shardid: string,
    streamarn: string,
    region: string,
    approximatecreationdatetime: string,
    deletiontime: string,
    sizebytes: bigint,
    ttlattribute: string,
    ttlvalue: string,
    ttltime: string,
    ttllagseconds: double,
    deletedby: string,
    image: string
  >
)
PARTITIONED BY (`table` string, kind string, dt string, hr string)
ROW FORMAT SERDE 'org.openx.data.jsonserde.JsonSerDe'
STORED AS INPUTFORMAT 'org.apache.hadoop.mapred.TextInputFormat'
  OUTPUTFORMAT 'org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat'
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
