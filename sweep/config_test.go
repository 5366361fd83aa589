package sweep

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/prometheus/client_golang/prometheus"
)

func TestNewNamesTheBadField(t *testing.T) {
	good := func() Config {
		return Config{Client: &dynamodb.Client{}, Table: "t", Cursor: newMemStore()}
	}
	for _, tc := range []struct {
		field string
		edit  func(*Config)
	}{
		{"Client", func(c *Config) { c.Client = nil }},
		{"Table", func(c *Config) { c.Table = "" }},
		{"Cursor", func(c *Config) { c.Cursor = nil }},
		{"Window", func(c *Config) { c.Window = -time.Minute }},
		{"Window", func(c *Config) { c.Window = 1500 * time.Microsecond }},
		{"WindowShards", func(c *Config) { c.WindowShards = -1 }},
		{"Interval", func(c *Config) { c.Interval = -time.Second }},
		{"Grace", func(c *Config) { c.Grace = -time.Second }},
		{"Lookback", func(c *Config) { c.Lookback = -time.Hour }},
		{"MaxDeletesPerSecond", func(c *Config) { c.MaxDeletesPerSecond = -1 }},
		{"Concurrency", func(c *Config) { c.Concurrency = -1 }},
	} {
		t.Run(tc.field, func(t *testing.T) {
			cfg := good()
			tc.edit(&cfg)
			_, err := New(cfg)
			if err == nil || !strings.Contains(err.Error(), "Config."+tc.field+" ") {
				t.Fatalf("New = %v, want an error naming Config.%s", err, tc.field)
			}
		})
	}
	t.Run("all at once", func(t *testing.T) {
		_, err := New(Config{Window: -1})
		for _, f := range []string{"Client", "Table", "Cursor", "Window"} {
			if err == nil || !strings.Contains(err.Error(), "Config."+f+" ") {
				t.Fatalf("New = %v, want it to name Config.%s", err, f)
			}
		}
	})
	t.Run("defaults", func(t *testing.T) {
		s, err := New(good())
		if err != nil {
			t.Fatal(err)
		}
		c := s.cfg
		if c.Index != DefaultIndex || c.WindowAttribute != DefaultWindowAttribute || c.Window != time.Minute || c.WindowShards != 1 ||
			c.Interval != time.Second || c.Grace != time.Minute || c.Lookback != time.Hour || c.Concurrency != 16 || s.limit != nil {
			t.Fatalf("defaults: %+v", c)
		}
	})
}

func TestTablesNotSetUpForSweeping(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    bedOptions
		edit func(*Config)
		want string // in the error; "" for none
	}{
		{"TTL disabled", bedOptions{noTTL: true}, nil, "table sessions has no TTL enabled: enable it, or name the TTL attribute to sweep on"},
		{"TTL disabled, attribute named", bedOptions{noTTL: true}, func(c *Config) { c.TTLAttribute = "ttl" }, ""},
		{"no such index", bedOptions{}, func(c *Config) { c.Index = "byWindow" }, `table sessions has no global secondary index "byWindow"`},
		{"another hash key", bedOptions{}, func(c *Config) { c.WindowAttribute = "bucket" }, `index expirationWindowIndex of table sessions has the hash key "expirationWindow", not the window attribute "bucket"`},
		{"TTL not in the index", bedOptions{hashOnly: true}, nil, `index expirationWindowIndex of table sessions neither has the TTL attribute "ttl" as its range key nor projects it`},
		{"TTL projected", bedOptions{hashOnly: true, projection: types.ProjectionTypeAll}, nil, ""},
		{"no such table", bedOptions{}, func(c *Config) { c.Table = "carts" }, "DescribeTimeToLive carts"},
		{"TTL enabled on another attribute", bedOptions{}, func(c *Config) { c.TTLAttribute = "expiresAt" },
			`table sessions has DynamoDB's TTL enabled on "ttl", not on the configured TTL attribute "expiresAt"`},
		{"TTL enabled on another attribute, overridden", bedOptions{projection: types.ProjectionTypeAll},
			func(c *Config) { c.TTLAttribute, c.TTLAttributeOverride = "expiresAt", true }, ""},
		{"TTL enabled on the attribute named", bedOptions{}, func(c *Config) { c.TTLAttribute = "ttl" }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBed(t, tc.o)
			s := b.sweeper(tc.edit)
			_, passErr := s.Pass(context.Background())
			if tc.want == "" {
				if passErr != nil {
					t.Fatalf("Pass = %v, want no error", passErr)
				}
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			runErr := s.Run(ctx) // returns at once with the error
			for _, err := range []error{passErr, runErr} {
				if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "Config.") {
					t.Fatalf("got %v, want an error saying %s and naming no Config field", err, tc.want)
				}
			}
			if ctx.Err() != nil {
				t.Fatal("Run did not return its error at once")
			}
		})
	}
}

func TestTTLNotANumber(t *testing.T) {
	// Without the TTL as the index's range key, items whose TTL is not a
	// Number can be in the index: they are DynamoDB's TTL's to ignore.
	b := newBed(t, bedOptions{hashOnly: true, projection: types.ProjectionTypeAll})
	ttl := at(10 * time.Second)
	w := Window(ttl, time.Minute, 1)
	items := []item{
		{pk: "due", ttl: ttl},
		{pk: "string", ttl: ttl, extra: map[string]types.AttributeValue{"ttl": &types.AttributeValueMemberS{Value: epoch(ttl)}}},
		{pk: "missing", ttl: ttl, window: w, extra: map[string]types.AttributeValue{"ttl": nil}},
	}
	b.put(items...)
	s := b.sweeper(nil)
	b.clock.Set(at(11 * time.Second))
	if st := b.pass(s); st.Deleted != 1 || st.NotNumber != 0 {
		t.Fatalf("open window: %+v, want the due item deleted and the others filtered out", st)
	}
	b.clock.Set(at(2*time.Minute + time.Millisecond))
	st := b.pass(s)
	if st.NotNumber != 2 || st.Deleted != 0 {
		t.Fatalf("closing window: %+v, want 2 TTLs that are not Numbers", st)
	}
	checkCursor(t, b, s, st)
	if left := b.remaining(); len(left) != 2 {
		t.Fatalf("%d items left, want the two without a Number TTL", len(left))
	}
	if got := value(t, s.m.skipped.WithLabelValues(reasonNotNumber)); got != 2 {
		t.Fatalf("skipped{reason=ttl_not_number} = %v, want 2", got)
	}
}

func TestParseTTL(t *testing.T) {
	for _, tc := range []struct {
		av types.AttributeValue
		ok bool
		ms int64
	}{
		{&types.AttributeValueMemberN{Value: "1700000000"}, true, 1700000000000},
		{&types.AttributeValueMemberN{Value: "1700000000.9999"}, true, 1700000000999},
		{&types.AttributeValueMemberN{Value: "1.7E9"}, true, 1700000000000},
		{&types.AttributeValueMemberN{Value: "-5.5"}, true, 0},
		{&types.AttributeValueMemberN{Value: "1e125"}, true, maxTTLMillis},
		{&types.AttributeValueMemberS{Value: "1700000000"}, false, 0},
		{nil, false, 0},
	} {
		v, ok := parseTTL(tc.av)
		if ok != tc.ok || (ok && v.ms != tc.ms) {
			t.Errorf("parseTTL(%v) = %d, %v; want %d, %v", tc.av, v.ms, ok, tc.ms, tc.ok)
		}
	}
}

func TestMetricsShareARegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	for _, tbl := range []string{"carts", "sessions"} {
		if _, err := New(Config{Client: &dynamodb.Client{}, Table: tbl, Cursor: newMemStore(), Registerer: reg}); err != nil {
			t.Fatal(err)
		}
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	tables := map[string]map[string]bool{}
	for _, f := range families {
		tables[f.GetName()] = map[string]bool{}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "table" {
					tables[f.GetName()][l.GetValue()] = true
				}
			}
		}
	}
	for _, name := range []string{
		"archiver_sweep_deleted_total", "archiver_sweep_refiled_total", "archiver_sweep_windows_behind",
		"archiver_sweep_cursor_age_seconds", "archiver_sweep_lag_seconds", "archiver_sweep_throttles_total",
		"archiver_sweep_errors_total", "archiver_sweep_passes_total",
	} {
		if !tables[name]["carts"] || !tables[name]["sessions"] {
			t.Errorf("%s has tables %v, want both", name, tables[name])
		}
	}
}

// TestCheck: Check describes the table once, without loading the cursor,
// and its mismatch error names both attributes.
func TestCheck(t *testing.T) {
	b := newBed(t, bedOptions{})
	s := b.sweeper(func(c *Config) { c.TTLAttribute = "expiresAt" })
	err := s.Check(context.Background())
	var mm *TTLAttributeMismatchError
	if !errors.As(err, &mm) || mm.Table != table || mm.Enabled != "ttl" || mm.Configured != "expiresAt" {
		t.Fatalf("Check = %v, want a *TTLAttributeMismatchError naming ttl and expiresAt", err)
	}
	if err := b.sweeper(nil).Check(context.Background()); err != nil {
		t.Fatalf("Check of a sweepable table = %v", err)
	}
	if _, saves := b.store.cursor(); len(saves) != 0 {
		t.Fatalf("Check saved cursors %v", saves)
	}
}
