package archive

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/ttl-archiver/archiver/internal/ddbjson"
	"github.com/ttl-archiver/archiver/manifest"
)

// ManifestSet is what an archive's _manifests/ folder holds.
type ManifestSet struct {
	// Stored are the manifests that decode, sorted by key; Key is the
	// object's key as listed (an S3 key with the prefix, or a path
	// relative to the directory), Digest that of its stored bytes.
	Stored []manifest.Stored
	// Bad are the .json files there that are not manifests (they do not
	// decode), and manifests stored elsewhere than their content puts
	// them (manifest.Key or ConflictKey: the archiver wrote no such
	// file), each with why. A misplaced manifest is in Stored too.
	Bad []Problem
	// Other are the keys there that are not .json files (skipped).
	Other []string
	// NotRead counts the manifests listed but not downloaded: the
	// interiors of shards a windowed read found outside its window (see
	// manifest.Stored.EndOnly).
	NotRead int
}

// maxManifestBytes bounds a manifest read (manifest.Decode's own bound):
// a longer object is reported without being downloaded.
const maxManifestBytes = 16 << 20

// Manifests lists and reads every coverage manifest of the archive (see
// package manifest): S3 keys under PREFIX/_manifests/, or files under
// DIR/_manifests/, downloaded Options.Parallel at a time, decoded and
// digested (manifest.Digest of the bytes read). What does not decode is
// a Problem naming its key, never an error: only a failure to list or to
// download (after retries) is.
func (a *Archive) Manifests(ctx context.Context) (ManifestSet, error) {
	set, _, err := a.manifestsWhere(ctx, manifestFilter{})
	return set, err
}

// manifestFilter says what manifestsWhere reads and keeps.
type manifestFilter struct {
	// keep accepts a manifest key relative to the archive's root (nil:
	// all); the others are not downloaded.
	keep func(rel string) bool
	// trim, when set, is called on each manifest as soon as it decoded
	// (concurrently): it drops what the caller will not use, before the
	// next manifests arrive, and returns what it wants kept of that.
	trim func(s *manifest.Stored) []uint64
	// reaches, when set, makes the read windowed. Of a shard with
	// manifests at two or more To, the last (by To, with its conflict
	// copies) is read first and given to reaches, which says whether the
	// shard's records may reach the window. A shard they may not reach,
	// and that a manifest read names as a parent, is read at its end only
	// (EndOnly): its other manifests are not downloaded. A shard no
	// manifest read names as a parent (a lineage's tip) is read whole:
	// it is what anchors the ends of the shards before it.
	reaches func(last []manifest.Stored) bool
}

// manifestKey is a manifest's key as listed, relative to the archive's
// root, and its size.
type manifestKey struct {
	key, rel string
	size     int64
}

// manifestsWhere is Manifests of the manifests f keeps, trimmed by f; the
// second result is, per manifest in the set's Stored, what f.trim
// returned.
func (a *Archive) manifestsWhere(ctx context.Context, f manifestFilter) (ManifestSet, [][]uint64, error) {
	var set ManifestSet
	var keys []manifestKey
	err := a.st.list(ctx, manifest.Dir, func(key, rel string, size int64) {
		switch {
		case !manifest.IsKey(rel):
			set.Other = append(set.Other, key)
		case f.keep == nil || f.keep(rel):
			keys = append(keys, manifestKey{key, rel, size})
		}
	})
	if err != nil {
		return set, nil, err
	}
	slices.SortFunc(keys, func(x, y manifestKey) int { return strings.Compare(x.key, y.key) })
	results, err := a.readWindowed(ctx, keys, f, &set)
	if err != nil {
		return set, nil, err
	}
	// A shard's manifests repeat its stream, table, Region, shard and
	// writer; verify holds every manifest, so they are kept once.
	var in ddbjson.Interner
	intern := in.String
	var trimmed [][]uint64
	for i, r := range results {
		if r.problem != "" {
			set.Bad = append(set.Bad, Problem{Object: keys[i].key, Problem: r.problem})
		}
		if r.s.Digest != "" {
			m := &r.s.M
			m.Stream, m.Region, m.Table = intern(m.Stream), intern(m.Region), intern(m.Table)
			m.Shard, m.Parent, m.Writer = intern(m.Shard), intern(m.Parent), intern(m.Writer)
			set.Stored = append(set.Stored, r.s)
			trimmed = append(trimmed, r.trimmed)
		}
	}
	return set, trimmed, nil
}

// readWindowed reads the manifests at keys (sorted), all of them unless
// f.reaches is set: then of each shard read at its end only (see
// manifestFilter.reaches) the others are skipped, counted in set.NotRead,
// and their results left zero.
func (a *Archive) readWindowed(ctx context.Context, keys []manifestKey, f manifestFilter, set *ManifestSet) ([]manifestRead, error) {
	results := make([]manifestRead, len(keys))
	var shards []shardKeys
	first := make([]int, 0, len(keys))
	if f.reaches == nil {
		for i := range keys {
			first = append(first, i)
		}
	} else {
		shards = groupShards(keys)
		for _, g := range shards {
			first = append(first, g.last...)
		}
	}
	if err := a.readManifests(ctx, keys, first, results, f.trim); err != nil {
		return nil, err
	}
	parents := map[[2]string]bool{}
	for _, i := range first {
		if m := &results[i].s.M; results[i].s.Digest != "" && m.Parent != "" {
			parents[[2]string{m.Stream, m.Parent}] = true
		}
	}
	var rest []int
	for _, g := range shards {
		if len(g.rest) == 0 {
			continue
		}
		last := readOf(results, g.last)
		if len(last) == 0 || !parents[[2]string{last[0].M.Stream, last[0].M.Shard}] || f.reaches(last) {
			rest = append(rest, g.rest...)
			continue
		}
		set.NotRead += len(g.rest)
		for _, i := range g.last {
			results[i].s.EndOnly = true
		}
	}
	slices.Sort(rest)
	return results, a.readManifests(ctx, keys, rest, results, f.trim)
}

// shardKeys are the indexes of one shard folder's manifest keys: those of
// its highest To (last) and the others (rest).
type shardKeys struct{ last, rest []int }

// groupShards groups sorted manifest keys by shard folder and, in each,
// finds those of the highest To: a key's name is the To, padded, then
// ".json" or a conflict's ".DIGEST12.json" (manifest.Key,
// manifest.ConflictKey).
func groupShards(keys []manifestKey) []shardKeys {
	var out []shardKeys
	for i := 0; i < len(keys); {
		dir, _ := splitManifestKey(keys[i].rel)
		start, lastTo := i, i
		for ; i < len(keys); i++ {
			d, to := splitManifestKey(keys[i].rel)
			if d != dir {
				break
			}
			if _, prev := splitManifestKey(keys[lastTo].rel); prev != to {
				lastTo = i
			}
		}
		g := shardKeys{}
		for j := start; j < i; j++ {
			if j < lastTo {
				g.rest = append(g.rest, j)
			} else {
				g.last = append(g.last, j)
			}
		}
		out = append(out, g)
	}
	return out
}

// splitManifestKey splits a manifest key into its folder and the padded
// To its name begins with.
func splitManifestKey(rel string) (dir, to string) {
	slash := strings.LastIndexByte(rel, '/')
	name := rel[slash+1:]
	to, _, _ = strings.Cut(name, ".")
	return rel[:slash+1], to
}

// readOf returns the manifests at idx that decoded.
func readOf(results []manifestRead, idx []int) []manifest.Stored {
	var out []manifest.Stored
	for _, i := range idx {
		if results[i].s.Digest != "" {
			out = append(out, results[i].s)
		}
	}
	return out
}

// manifestRead is one manifest downloaded: the manifest, or the problem
// that it is not one (or both, when it is stored elsewhere than its
// content puts it), and what trim returned.
type manifestRead struct {
	s       manifest.Stored
	problem string
	trimmed []uint64
}

// readManifests downloads and decodes the manifests at keys[i] for each i
// of idx into results[i], Options.Parallel at a time, calling trim (when
// set) on each that decodes.
func (a *Archive) readManifests(ctx context.Context, keys []manifestKey, idx []int, results []manifestRead, trim func(*manifest.Stored) []uint64) error {
	errs := make([]error, len(idx))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(a.o.Parallel, max(len(idx), 1)) {
		wg.Go(func() {
			for j := range next {
				i := idx[j]
				k, r := keys[i], &results[i]
				if k.size > maxManifestBytes {
					r.problem = fmt.Sprintf("not a manifest: %d bytes, longer than any manifest (%d)", k.size, maxManifestBytes)
					continue
				}
				body, _, err := a.st.get(ctx, k.key, k.size)
				if err != nil {
					errs[j] = fmt.Errorf("archive %s: reading manifest %s: %w", a.url, k.key, err)
					continue
				}
				r.s, r.problem = readManifest(k.key, k.rel, body)
				if trim != nil && r.s.Digest != "" {
					r.trimmed = trim(&r.s)
				}
			}
		})
	}
	for j := range idx {
		select {
		case next <- j:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, err := range errs {
		if err != nil {
			return err // the first in key order
		}
	}
	return nil
}

// readManifest decodes one stored manifest. A manifest that does not
// decode returns only a problem; one stored elsewhere than its content
// puts it returns itself and a problem.
func readManifest(key, rel string, body []byte) (manifest.Stored, string) {
	m, err := manifest.Decode(bytes.NewReader(body))
	if err != nil {
		return manifest.Stored{}, "not a manifest: " + err.Error()
	}
	s := manifest.Stored{Key: key, Digest: manifest.Digest(body), M: m}
	if want := manifest.Key(m); rel != want && rel != manifest.ConflictKey(m, s.Digest) {
		return s, fmt.Sprintf("misplaced: a manifest of table %s, Region %s, shard %s up to %s, which the archiver stores at %s",
			m.Table, orNone(m.Region), m.Shard, m.To, want)
	}
	return s, ""
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
