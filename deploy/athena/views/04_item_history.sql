-- item_history: every archived event of every item, to be filtered by
-- table and key and sorted by stream_order, e.g.
--   SELECT created_at, kind, event_name, deleted_by, item
--   FROM item_history
--   WHERE table_name = 'sessions' AND keys['pk'].s = 'user#1'
--   ORDER BY stream_order
-- keys['ATTR'].s, .n and .b are a key attribute's string, number (exact
-- decimal text) and binary (base64) value; ttl_value is an expired item's
-- TTL attribute as the archiver read it (epoch seconds); read any other
-- attribute with json_extract_scalar(item, '$.plan.S').
CREATE OR REPLACE VIEW item_history AS
SELECT
  table_name,
  keys,
  stream_order,
  created_at,
  kind,
  event_name,
  deleted_by,
  ttl_time,
  ttl_value,
  item,
  old_image,
  event_id,
  region,
  dt,
  hr
FROM archive_events
