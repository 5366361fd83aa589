-- archive_events: one row per archived event, the archive line unwrapped.
-- The archive is at-least-once (a re-delivered tail can be written twice,
-- see README "The archive format"); copies of an event share its
-- partition and Metadata.eventID, and only the first is kept here, so
-- counts over this view count events, not lines. An expiry of a global
-- table archived by two Regions is two records with two event IDs but
-- one item, TTL included: an expiry that carries its item (no
-- image = keys-only) is one event by its table, partition and Item, as
-- the archiver's readers count it (docs/MESSAGES.md, "Message IDs"), and
-- the first deleted copy is kept (copies deleted on either side of a
-- full hour count twice, as there).
--
-- ttl_lag_seconds is deletion time minus TTL time: Metadata.ttlLagSeconds,
-- written whenever both times are known, 0 included; lines of older
-- versions left a lag of 0 out, so it is 0 whenever the TTL time is known
-- and the lag is absent. stream_order sorts an item's
-- events in stream order (sequence numbers are decimals of up to 40
-- digits; compared as text they would not sort). region is the AWS Region
-- whose stream the record was read from (a global table's replica); a
-- line written before lines named it takes its streamArn's.
CREATE OR REPLACE VIEW archive_events AS
SELECT
  "table" AS table_name,
  kind,
  dt,
  hr,
  metadata.eventid AS event_id,
  metadata.eventname AS event_name,
  metadata.deletedby AS deleted_by,
  coalesce(metadata.region, nullif(split_part(metadata.streamarn, ':', 4), '')) AS region,
  from_iso8601_timestamp(metadata.approximatecreationdatetime) AS created_at,
  from_iso8601_timestamp(metadata.ttltime) AS ttl_time,
  CASE WHEN metadata.ttltime IS NOT NULL THEN coalesce(metadata.ttllagseconds, 0) END AS ttl_lag_seconds,
  metadata.ttlattribute AS ttl_attribute,
  metadata.ttlvalue AS ttl_value,
  metadata.image AS image,
  metadata.shardid AS shard_id,
  metadata.sequencenumber AS sequence_number,
  lpad(metadata.sequencenumber, 40, '0') AS stream_order,
  keys,
  item,
  oldimage AS old_image
FROM (
  SELECT
    *,
    row_number() OVER (
      PARTITION BY "table", kind, dt, hr,
        CASE WHEN kind = 'expired' AND metadata.image IS NULL THEN CAST(item AS varchar) ELSE metadata.eventid END
      ORDER BY metadata.approximatecreationdatetime, metadata.region
    ) AS copy_no
  FROM ttl_archive
)
WHERE copy_no = 1
