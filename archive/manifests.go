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
	return a.manifestsWhere(ctx, nil)
}

// manifestsWhere is Manifests of the manifest keys keep accepts (nil:
// all), given relative to the archive's root; the others are not
// downloaded.
func (a *Archive) manifestsWhere(ctx context.Context, keep func(rel string) bool) (ManifestSet, error) {
	var set ManifestSet
	type entry struct {
		key, rel string
		size     int64
	}
	var keys []entry
	err := a.st.list(ctx, manifest.Dir, func(key, rel string, size int64) {
		if manifest.IsKey(rel) && keep != nil && !keep(rel) {
			return
		}
		if manifest.IsKey(rel) {
			keys = append(keys, entry{key, rel, size})
		} else {
			set.Other = append(set.Other, key)
		}
	})
	if err != nil {
		return set, err
	}
	slices.SortFunc(keys, func(x, y entry) int { return strings.Compare(x.key, y.key) })
	type result struct {
		s       manifest.Stored
		problem string
		err     error
	}
	results := make([]result, len(keys))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(a.o.Parallel, max(len(keys), 1)) {
		wg.Go(func() {
			for i := range next {
				k := keys[i]
				if k.size > maxManifestBytes {
					results[i].problem = fmt.Sprintf("not a manifest: %d bytes, longer than any manifest (%d)", k.size, maxManifestBytes)
					continue
				}
				body, _, err := a.st.get(ctx, k.key, k.size)
				if err != nil {
					results[i].err = fmt.Errorf("archive %s: reading manifest %s: %w", a.url, k.key, err)
					continue
				}
				results[i].s, results[i].problem = readManifest(k.key, k.rel, body)
			}
		})
	}
	for i := range keys {
		select {
		case next <- i:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return set, err
	}
	// A shard's manifests repeat its stream, table, Region, shard and
	// writer; verify holds every manifest, so they are kept once.
	var in ddbjson.Interner
	intern := in.String
	for i, r := range results {
		if r.err != nil {
			return set, r.err
		}
		if r.problem != "" {
			set.Bad = append(set.Bad, Problem{Object: keys[i].key, Problem: r.problem})
		}
		if r.s.Digest != "" {
			m := &r.s.M
			m.Stream, m.Region, m.Table = intern(m.Stream), intern(m.Region), intern(m.Table)
			m.Shard, m.Parent, m.Writer = intern(m.Shard), intern(m.Parent), intern(m.Writer)
			set.Stored = append(set.Stored, r.s)
		}
	}
	return set, nil
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
