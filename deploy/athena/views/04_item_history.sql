-- item_history: every archived event of every item, to be filtered by
-- table and key and sorted by stream_order, e.g.
--   SELECT created_at, kind, event_name, deleted_by, item
--   FROM item_history
--   WHERE table_name = 'sessions' AND keys['pk'].s = 'user#1'
--   ORDER BY stream_order
-- keys['ATTR'].s, .n and .b are a key attribute's string, number (exact
-- decimal text) and binary (base64) value; ttl_value is the TTL
-- attribute's value in the item's image, as epoch seconds.
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
  json_extract_scalar(item, '$["' || ttl_attribute || '"].N') AS ttl_value,
  item,
  old_image,
  event_id,
  dt,
  hr
FROM archive_events
