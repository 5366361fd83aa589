-- The Athena (Trino) functions the views call, as DuckDB macros, so that
-- ../views/*.sql run in DuckDB byte for byte as they run in Athena. This
-- file is the whole translation between the two dialects; the table itself
-- is ./table.sql. A view that needs another Athena function adds its macro
-- here.
--
-- approx_percentile is exact here (quantile_disc: the smallest value with
-- at least that fraction of the values at or below it); Athena's is an
-- estimate within about 1% of rank.
-- json_extract_scalar: Trino names a member with brackets, $["a-b"].N;
-- DuckDB with quotes after the dot, $."a-b".N.
CREATE OR REPLACE MACRO json_extract_scalar(j, path) AS
  json_extract_string(j, replace(replace(path, '["', '."'), '"]', '"'));
CREATE OR REPLACE MACRO from_iso8601_timestamp(s) AS CAST(s AS TIMESTAMPTZ);
CREATE OR REPLACE MACRO approx_percentile(x, p) AS quantile_disc(x, p);
