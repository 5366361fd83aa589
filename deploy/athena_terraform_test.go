package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ttl-archiver/archiver/event"
)

var (
	tfGlueColumn = regexp.MustCompile(`(columns|partition_keys) \{\s*name\s*=\s*"([^"]+)"\s*type\s*=\s*"([^"]+)"\s*\}`)
	tfParam      = regexp.MustCompile(`(?m)^\s*"([^"]+)"\s*=\s*(.+?)\s*$`)
	ddlProp      = regexp.MustCompile(`'([^']+)'\s*=\s*'([^']*)'`)
	ddlQuoted    = regexp.MustCompile(`(?m)^(ROW FORMAT SERDE|STORED AS INPUTFORMAT|\s*OUTPUTFORMAT)\s+'([^']+)'`)
)

// TestAthenaTerraform: the Glue table of terraform/athena.tf is the table
// of athena/table.sql: the same columns and partition keys with the same
// types, the same SerDe and formats, the same projection (but `table`, an
// enum of the deployed tables instead of injected) and location template,
// and the named queries are the view files the DuckDB test runs. The
// projected kinds are the archiver's.
func TestAthenaTerraform(t *testing.T) {
	tf := readFile(t, "terraform/athena.tf")
	table := tfBlock(tf, `resource "aws_glue_catalog_table" "archive"`)
	if table == "" {
		t.Fatal(`terraform/athena.tf: no resource "aws_glue_catalog_table" "archive"`)
	}
	ddl := readFile(t, "athena/table.sql")

	var got, parts, want []string
	for _, m := range tfGlueColumn.FindAllStringSubmatch(table, -1) {
		if m[1] == "partition_keys" {
			parts = append(parts, m[2]+" "+m[3])
		} else {
			got = append(got, m[2]+" "+m[3])
		}
	}
	got = append(got, parts...) // table.sql's order: columns, then partitions
	for _, c := range athenaDDLColumns(t) {
		want = append(want, c[0]+" "+strings.NewReplacer("`", "", " ", "").Replace(c[1]))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Glue columns:\n%s\ntable.sql:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	for _, m := range ddlQuoted.FindAllStringSubmatch(ddl, -1) {
		if !strings.Contains(table, `"`+m[2]+`"`) {
			t.Errorf("table.sql's %s %s is not in the Glue table", strings.TrimSpace(m[1]), m[2])
		}
	}

	params := map[string]string{}
	for _, m := range tfParam.FindAllStringSubmatch(tfBlock(table, "parameters = {"), -1) {
		params[m[1]] = m[2]
	}
	// What the Terraform's expressions are, spelled as table.sql spells
	// them (its placeholders, the default first day).
	expressions := map[string]string{
		`"${var.athena_first_day},NOW"`: `"2024-01-01,NOW"`,
		`local.projected_hours`:         `"00,01,02,03,04,05,06,07,08,09,10,11,12,13,14,15,16,17,18,19,20,21,22,23"`,
		`"${local.archive_url}table=$${table}/kind=$${kind}/dt=$${dt}/hr=$${hr}/"`: `"s3://BUCKET/PREFIX/table=${table}/kind=${kind}/dt=${dt}/hr=${hr}/"`,
	}
	if !strings.Contains(tf, `archive_url     = "s3://${var.bucket_name}/${var.archive_prefix}"`) {
		t.Error(`terraform/athena.tf: local.archive_url is not "s3://${var.bucket_name}/${var.archive_prefix}"`)
	}
	props := ddlProp.FindAllStringSubmatch(between(t, ddl, "TBLPROPERTIES (", "\n)"), -1)
	if len(props) == 0 {
		t.Fatal("table.sql: no TBLPROPERTIES")
	}
	for _, m := range props {
		key, val := m[1], fmt.Sprintf("%q", m[2])
		if key == "projection.table.type" {
			val = `"enum"` // injected in table.sql: any table; the deployed ones here
		}
		expr, ok := params[key]
		if e, isExpr := expressions[expr]; isExpr {
			expr = e
		}
		if !ok || expr != val {
			t.Errorf("Glue parameter %s = %s, table.sql has %s", key, params[key], val)
		}
	}
	var kinds []string
	for _, k := range event.Kinds {
		kinds = append(kinds, string(k))
	}
	if m := regexp.MustCompile(`'projection.kind.values' = '([^']*)'`).FindStringSubmatch(ddl); m == nil || m[1] != strings.Join(kinds, ",") {
		t.Errorf("table.sql: projection.kind.values %q, the archiver writes kinds %q", m, strings.Join(kinds, ","))
	}
	if params["projection.table.values"] != `join(",", distinct(compact(concat([var.source_table], var.athena_tables))))` {
		t.Errorf("projection.table.values = %s: want the source table and athena_tables", params["projection.table.values"])
	}

	// The named queries are created from these files; the DuckDB test runs them.
	if !strings.Contains(tf, `fileset("${path.module}/../athena/views", "*.sql")`) {
		t.Error("terraform/athena.tf: the named queries are not the files of deploy/athena/views")
	}
	if views, _ := filepath.Glob("athena/views/*.sql"); len(views) < 4 {
		t.Errorf("athena/views holds %d views", len(views))
	}
	if _, err := os.Stat("terraform/../athena/views"); err != nil {
		t.Error(err)
	}
}
