// Command duckq runs SQL with DuckDB, for the tests that query an archive
// the way an analyst would (deploy/athena). It is built by .ci/tools.sh into
// .tools/bin; its own module keeps DuckDB (cgo, a static library) out of
// the archiver's go.mod.
//
// Usage:
//
//	duckq [-f SCRIPT]... [-q QUERY]...
//
// Every -f file is run first, in order, as statements (views, settings),
// in one in-memory database; then every -q query runs in that database and
// prints one line: a JSON object {"columns":[...],"rows":[[...],...]}.
// A failing statement or query ends the run with its error on stderr and
// exit status 1.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"os"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"
)

type list []string

func (l *list) String() string     { return fmt.Sprint(*l) }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var files, queries list
	flag.Var(&files, "f", "SQL script to run first (repeatable)")
	flag.Var(&queries, "q", "query whose result is printed as one JSON line (repeatable)")
	timeout := flag.Duration("timeout", 2*time.Minute, "the whole run's time limit")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "duckq: unexpected argument %q\n", flag.Arg(0))
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := run(ctx, files, queries, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "duckq:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, files, queries []string, out io.Writer) error {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer db.Close()
	// One connection: the views the scripts create live in it.
	db.SetMaxOpenConns(1)
	for _, f := range files {
		script, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if _, err := db.ExecContext(ctx, string(script)); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
	}
	enc := json.NewEncoder(out)
	for _, q := range queries {
		res, err := query(ctx, db, q)
		if err != nil {
			return fmt.Errorf("query %q: %w", q, err)
		}
		if err := enc.Encode(res); err != nil {
			return err
		}
	}
	return nil
}

type result struct {
	Columns []string `json:"columns"`
	Rows    [][]any  `json:"rows"`
}

func query(ctx context.Context, db *sql.DB, q string) (result, error) {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return result{}, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return result{}, err
	}
	res := result{Columns: cols, Rows: [][]any{}}
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return result{}, err
		}
		for i, v := range vals {
			vals[i] = jsonable(v)
		}
		res.Rows = append(res.Rows, vals)
	}
	return res, errors.Join(rows.Err(), rows.Close())
}

// jsonable turns what the driver scans into a value encoding/json writes
// as the reader expects: times in RFC 3339 (UTC), HUGEINT as a number,
// maps as the driver encodes them, anything without a JSON form as its
// text.
func jsonable(v any) any {
	switch x := v.(type) {
	case nil, bool, string, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float32, float64:
		return x
	case *big.Int:
		return x // encoding/json writes it as a number
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	case []byte:
		return string(x)
	case []any:
		for i := range x {
			x[i] = jsonable(x[i])
		}
		return x
	case map[string]any:
		for k := range x {
			x[k] = jsonable(x[k])
		}
		return x
	case json.Marshaler:
		return x // a map (duckdb.OrderedMap) writes itself
	default:
		return fmt.Sprint(x) // a DECIMAL as its exact text
	}
}
