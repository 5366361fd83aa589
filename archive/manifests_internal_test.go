package archive

import (
	"context"
	"hash/maphash"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ttl-archiver/archiver/manifest"
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

// TestTrimKeepsWhatTheReadReaches: of a manifest's objects, trim keeps
// those in the selection's partitions and keys off the layout (findings),
// and returns a hash for each other, which no longer holds its strings.
func TestTrimKeepsWhatTheReadReaches(t *testing.T) {
	c := NewCoverage(Selection{Since: time.Date(2026, 3, 4, 6, 0, 0, 0, time.UTC)})
	in, out, stray := "T/2026-03-04/06.jsonl", "T/2026-03-04/05.jsonl", "notes.txt"
	s := manifest.Stored{M: manifest.Manifest{Objects: []manifest.Object{{Key: out}, {Key: in}, {Key: stray}, {Key: "T/2026-03-04/04.jsonl"}}}}
	gone := c.trim(&s)
	var kept []string
	for _, o := range s.M.Objects {
		kept = append(kept, o.Key)
	}
	if !slices.Equal(kept, []string{in, stray}) || len(gone) != 2 || gone[0] != maphash.String(c.seed, out) {
		t.Errorf("kept %q, gone %v", kept, gone)
	}
	if all := s.M.Objects[:cap(s.M.Objects)]; all[2].Key != "" || all[3].Key != "" {
		t.Errorf("the backing array still holds %q, %q", all[2].Key, all[3].Key)
	}
	s = manifest.Stored{M: manifest.Manifest{Objects: []manifest.Object{{Key: out}}}}
	if gone := c.trim(&s); len(gone) != 1 || s.M.Objects != nil {
		t.Errorf("a manifest of one object outside: objects %v, gone %v", s.M.Objects, gone)
	}
}

// TestLoadTrims: Load trims each manifest as it reads it, so a manifest
// whose object lies outside the window holds no object once loaded.
func TestLoadTrims(t *testing.T) {
	dir := t.TempDir()
	m := manifest.New(manifest.Range{StreamARN: "arn:aws:dynamodb:us-east-1:1:table/T/stream/s", Region: "us-east-1", Table: "T", ShardID: "a", To: "9"},
		[]manifest.Object{{Key: "T/2026-03-04/05.jsonl", Bytes: 1, SHA256: strings.Repeat("0", 64)}}, "", "w", time.Unix(0, 0))
	p := filepath.Join(dir, filepath.FromSlash(manifest.Key(m)))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, manifest.Encode(m), 0o644); err != nil {
		t.Fatal(err)
	}
	a := &Archive{st: &fileStore{dir: dir}, url: "file://" + dir}
	a.o.defaults()
	cov := NewCoverage(Selection{Since: time.Date(2026, 3, 4, 6, 0, 0, 0, time.UTC)})
	if err := cov.Load(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if len(cov.set.Stored) != 1 || cov.set.Stored[0].M.Objects != nil || len(cov.notRead) != 1 || len(cov.listed) != 0 {
		t.Errorf("loaded %+v, %d not read, %d listed: want the manifest without its object", cov.set.Stored, len(cov.notRead), len(cov.listed))
	}
}

// TestGroupShards: sorted manifest keys group by shard folder, and in
// each those of the highest To (a conflict copy, its key with a digest,
// with its To) from the rest.
func TestGroupShards(t *testing.T) {
	var keys []manifestKey
	for _, rel := range []string{
		"_manifests/table=t/region=r/stream=s/shard=a/001.0123456789ab.json",
		"_manifests/table=t/region=r/stream=s/shard=a/001.json",
		"_manifests/table=t/region=r/stream=s/shard=a/002.json",
		"_manifests/table=t/region=r/stream=s/shard=a/003.json",
		"_manifests/table=t/region=r/stream=s/shard=a/004.json",
		"_manifests/table=t/region=r/stream=s/shard=a/004.ba9876543210.json",
		"_manifests/table=t/region=r/stream=s/shard=b/001.json",
		"_manifests/table=t/region=r/stream=s/shard=b/002.json",
		"_manifests/table=t/region=r/stream=s/shard=c/001.json",
	} {
		keys = append(keys, manifestKey{key: "p/" + rel, rel: rel})
	}
	slices.SortFunc(keys, func(x, y manifestKey) int { return strings.Compare(x.key, y.key) })
	got := groupShards(keys)
	want := []shardKeys{
		{last: []int{4, 5}, rest: []int{0, 1, 2, 3}},
		{last: []int{7}, rest: []int{6}},
		{last: []int{8}},
	}
	if len(got) != len(want) {
		t.Fatalf("%d shards, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if !slices.Equal(got[i].last, want[i].last) || !slices.Equal(got[i].rest, want[i].rest) {
			t.Errorf("shard %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

// FuzzGroupShards: whatever keys a listing holds, groupShards puts each
// in exactly one shard, in its folder, and a shard's last are the run of
// its keys at the end, in key order, that share one To (for the
// archiver's own keys, whose To is padded to one width, those of the
// highest To).
func FuzzGroupShards(f *testing.F) {
	f.Add("_manifests/t/s=a/001.json\n_manifests/t/s=a/002.x.json\n_manifests/t/s=a/002.json\n_manifests/t/s=b/001.json")
	f.Add("_manifests/a\n_manifests/a/\n_manifests//.json\n_manifests/a/..json")
	f.Fuzz(func(t *testing.T, listing string) {
		var keys []manifestKey
		for _, rel := range strings.Split(listing, "\n") {
			if strings.HasPrefix(rel, manifest.Dir) {
				keys = append(keys, manifestKey{key: rel, rel: rel})
			}
		}
		slices.SortFunc(keys, func(x, y manifestKey) int { return strings.Compare(x.key, y.key) })
		seen := make([]int, len(keys))
		for _, g := range groupShards(keys) {
			if len(g.last) == 0 {
				t.Fatalf("a shard without a last: %+v", g)
			}
			dir, top := splitManifestKey(keys[g.last[0]].rel)
			for _, i := range append(slices.Clone(g.rest), g.last...) {
				seen[i]++
				if d, _ := splitManifestKey(keys[i].rel); d != dir {
					t.Fatalf("%q grouped with %q", keys[i].rel, dir)
				}
			}
			for _, i := range g.last {
				if _, to := splitManifestKey(keys[i].rel); to != top {
					t.Fatalf("last %q, To %q; want %q", keys[i].rel, to, top)
				}
			}
			for _, i := range g.rest {
				if i > g.last[0] {
					t.Fatalf("rest %q follows the last %q", keys[i].rel, keys[g.last[0]].rel)
				}
			}
			if n := len(g.rest); n > 0 {
				if _, to := splitManifestKey(keys[g.rest[n-1]].rel); to == top {
					t.Fatalf("rest %q ends with the last's To %q", keys[g.rest[n-1]].rel, top)
				}
			}
		}
		for i, n := range seen {
			if n != 1 {
				t.Fatalf("%q grouped %d times", keys[i].rel, n)
			}
		}
	})
}

// TestReachesTrustsNoClock: whether a shard's last manifests put it
// before Since goes by the record times they hold, an hour's margin
// given; an empty range (an ended shard's last, beside the range it
// shares its To with) adds nothing, and when no range holds a record the
// shard is read whole, whatever the writer's clock said.
func TestReachesTrustsNoClock(t *testing.T) {
	since := time.Date(2026, 3, 4, 12, 30, 0, 0, time.UTC)
	c := NewCoverage(Selection{Since: since})
	ranged := func(last time.Time) manifest.Stored {
		return manifest.Stored{M: manifest.Manifest{FirstTime: last.Add(-time.Hour), LastTime: last, Written: last.Add(time.Minute)}}
	}
	empty := manifest.Stored{M: manifest.Manifest{Ended: true, Written: since.Add(-48 * time.Hour)}} // a clock two days behind
	for _, tc := range []struct {
		name string
		last []manifest.Stored
		want bool
	}{
		{"records before the margin", []manifest.Stored{ranged(since.Add(-2 * time.Hour))}, false},
		{"records within the margin", []manifest.Stored{ranged(since.Add(-80 * time.Minute))}, true},
		{"records in the window", []manifest.Stored{ranged(since.Add(time.Hour))}, true},
		{"an empty end beside records before", []manifest.Stored{ranged(since.Add(-2 * time.Hour)), empty}, false},
		{"an empty end alone, written by a clock behind", []manifest.Stored{empty}, true},
	} {
		if got := c.reaches(tc.last); got != tc.want {
			t.Errorf("%s: reaches %v, want %v", tc.name, got, tc.want)
		}
	}
}
