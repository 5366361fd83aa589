package archive

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// gets records the keys an archive downloads.
type gets struct {
	store
	mu   sync.Mutex
	keys []string
}

func (g *gets) get(ctx context.Context, key string, size int64) ([]byte, string, error) {
	g.mu.Lock()
	g.keys = append(g.keys, key)
	g.mu.Unlock()
	return g.store.get(ctx, key, size)
}

// TestLoadReadsSelectedTablesManifests: a Coverage of one table downloads
// only the manifests in that table's folder (and in a folder naming no
// table, whose problem is everyone's), so another table's manifests cost
// verify --table neither memory nor requests.
func TestLoadReadsSelectedTablesManifests(t *testing.T) {
	dir := t.TempDir()
	for _, rel := range []string{
		"_manifests/table=T/region=us-east-1/stream=s/shard=a/" + strings.Repeat("0", 63) + "1.json",
		"_manifests/table=U/region=us-east-1/stream=s/shard=a/" + strings.Repeat("0", 63) + "1.json",
		"_manifests/table=U%zz/region=us-east-1/stream=s/shard=a/" + strings.Repeat("0", 63) + "1.json",
	} {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		tables []string
		want   []string // tables whose folder was read
	}{
		{nil, []string{"T", "U", "U%zz"}},
		{[]string{"T"}, []string{"T", "U%zz"}},
		{[]string{"V"}, []string{"U%zz"}},
	} {
		g := &gets{store: &fileStore{dir: dir}}
		a := &Archive{st: g, url: "file://" + dir}
		a.o.defaults()
		cov := NewCoverage(Selection{Tables: tc.tables})
		if err := cov.Load(context.Background(), a); err != nil {
			t.Fatal(err)
		}
		var read []string
		for _, k := range g.keys {
			seg, _, _ := strings.Cut(strings.TrimPrefix(k, "_manifests/table="), "/")
			read = append(read, seg)
		}
		slices.Sort(read)
		if !slices.Equal(read, tc.want) {
			t.Errorf("tables %q: read the folders of %q, want %q", tc.tables, read, tc.want)
		}
		if len(cov.set.Bad) != len(tc.want) {
			t.Errorf("tables %q: problems %+v, want one for each folder read (none decodes)", tc.tables, cov.set.Bad)
		}
	}
}
