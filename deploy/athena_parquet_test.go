package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeParquetArchive archives the test's events with the S3 sink's
// format=parquet into versitygw and downloads the objects into a
// directory at their keys (what `aws s3 sync` makes of them), which it
// returns.
func writeParquetArchive(t *testing.T) string {
	t.Helper()
	return writeTestArchiveWith(t, "&format=parquet")
}

// parquetSetup returns the DuckDB scripts of athenaSetup over ndjsonDir
// and duckdb/parquet.sql pointed at parquetDir.
func parquetSetup(t *testing.T, ndjsonDir, parquetDir string) []string {
	t.Helper()
	view := strings.ReplaceAll(readFile(t, "athena/duckdb/parquet.sql"), "ARCHIVE_DIR", filepath.ToSlash(parquetDir))
	p := filepath.Join(t.TempDir(), "parquet.sql")
	if err := os.WriteFile(p, []byte(view), 0o644); err != nil {
		t.Fatal(err)
	}
	return append(athenaSetup(t, ndjsonDir), p)
}

// TestAthenaParquetTable asks the Parquet table and the NDJSON table of
// the same events the same questions with DuckDB, which reads the Parquet
// files by their own schema: the answers agree, and the typed columns
// (timestamps, the decimal lag, the key map) answer without JSON.
func TestAthenaParquetTable(t *testing.T) {
	duckqBinary(t)
	ndjson, pq := writeTestArchive(t), writeParquetArchive(t)
	pairs := [][2]string{
		{`SELECT "table", kind, dt, hr, count(DISTINCT metadata.eventid) FROM ttl_archive GROUP BY ALL ORDER BY ALL`,
			`SELECT "table", kind, dt, hr, count(DISTINCT event_id) FROM ttl_archive_parquet GROUP BY ALL ORDER BY ALL`},
		{`SELECT json_extract_scalar(item, '$.plan.S'), metadata.eventname FROM ttl_archive
		  WHERE "table" = 'sessions' AND keys['pk'].s = 'user#7' ORDER BY lpad(metadata.sequencenumber, 40, '0')`,
			`SELECT json_extract_scalar(item, '$.plan.S'), event_name FROM ttl_archive_parquet
		  WHERE "table" = 'sessions' AND key['pk'] = 'user#7' ORDER BY lpad(sequence_number, 40, '0')`},
		{`SELECT count(DISTINCT metadata.eventid), CAST(sum(metadata.ttllagseconds) AS DECIMAL(18,3)) FROM (SELECT DISTINCT metadata FROM ttl_archive) WHERE metadata.ttltime IS NOT NULL`,
			`SELECT count(DISTINCT event_id), CAST(sum(ttl_lag_seconds) AS DECIMAL(18,3)) FROM (SELECT DISTINCT event_id, ttl_lag_seconds, ttl_time FROM ttl_archive_parquet) WHERE ttl_time IS NOT NULL`},
		{`SELECT count(*) FROM (SELECT DISTINCT metadata.eventid FROM ttl_archive WHERE from_iso8601_timestamp(metadata.ttltime) < TIMESTAMPTZ '2025-03-01 03:30:00+00')`,
			`SELECT count(*) FROM (SELECT DISTINCT event_id FROM ttl_archive_parquet WHERE ttl_time < TIMESTAMPTZ '2025-03-01 03:30:00+00')`},
	}
	var qs []string
	for _, p := range pairs {
		qs = append(qs, p[0], p[1])
	}
	res := duckQuery(t, parquetSetup(t, ndjson, pq), qs...)
	for i := range pairs {
		nd, pa := rowsText(res[2*i]), rowsText(res[2*i+1])
		if nd != pa || nd == "" {
			t.Errorf("%s\nNDJSON:\n%sParquet:\n%s", pairs[i][1], nd, pa)
		}
	}
}

// TestAthenaParquetTableMatchesDuckDB: DuckDB's view of the Parquet files
// has the columns, types and partitions of deploy/athena/parquet.sql
// (Athena's timestamp is DuckDB's TIMESTAMP WITH TIME ZONE: the files'
// times are UTC instants).
func TestAthenaParquetTableMatchesDuckDB(t *testing.T) {
	duckqBinary(t)
	ndjson := t.TempDir()
	writeArchiveLine(t, ndjson, "table=t/kind=expired/dt=2025-03-01/hr=00/s-1-1.jsonl.gz")
	res := duckQuery(t, parquetSetup(t, ndjson, writeParquetArchive(t)), `DESCRIBE ttl_archive_parquet`)
	var got []string
	for _, row := range res[0].Rows {
		typ := strings.NewReplacer("timestamp with time zone", "timestamp", " ", "").Replace(strings.ToLower(fmt.Sprint(row[1])))
		got = append(got, strings.ToLower(fmt.Sprint(row[0]))+" "+typ)
	}
	var want []string
	for _, c := range ddlColumns(t, "athena/parquet.sql", "ttl_archive_parquet") {
		typ := strings.NewReplacer("string", "varchar", "<", "(", ">", ")", " ", "").Replace(c[1])
		want = append(want, c[0]+" "+typ)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("DuckDB's ttl_archive_parquet:\n%s\nAthena's (translated):\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
