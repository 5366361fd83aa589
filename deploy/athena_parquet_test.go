package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/parquetline"
)

// writeParquetArchive writes the test's events as Parquet objects in a
// directory, one per table, kind and hour, at the keys the sinks'
// format=parquet gives them, and returns the directory.
func writeParquetArchive(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	groups := map[string][]event.Event{}
	var order []string
	for _, b := range athenaBatches() {
		for _, e := range b {
			at := e.ApproximateCreationTime.UTC()
			rel := fmt.Sprintf("table=%s/kind=%s/dt=%s/hr=%02d/%s-1-1.parquet", e.Table, e.Kind, at.Format("2006-01-02"), at.Hour(), e.ShardID)
			if groups[rel] == nil {
				order = append(order, rel)
			}
			groups[rel] = append(groups[rel], e)
		}
	}
	for _, rel := range order {
		body, err := parquetline.Encode(groups[rel])
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
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
