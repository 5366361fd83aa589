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
	results, err := a.readManifests(ctx, keys, f.trim)
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

// manifestRead is one manifest downloaded: the manifest, or the problem
// that it is not one (or both, when it is stored elsewhere than its
// content puts it), and what trim returned.
type manifestRead struct {
	s       manifest.Stored
	problem string
	trimmed []uint64
}

// readManifests downloads and decodes the manifests at keys,
// Options.Parallel at a time, calling trim (when set) on each that
// decodes.
func (a *Archive) readManifests(ctx context.Context, keys []manifestKey, trim func(*manifest.Stored) []uint64) ([]manifestRead, error) {
	results := make([]manifestRead, len(keys))
	errs := make([]error, len(keys))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(a.o.Parallel, max(len(keys), 1)) {
		wg.Go(func() {
			for i := range next {
				k, r := keys[i], &results[i]
				if k.size > maxManifestBytes {
					r.problem = fmt.Sprintf("not a manifest: %d bytes, longer than any manifest (%d)", k.size, maxManifestBytes)
					continue
				}
				body, _, err := a.st.get(ctx, k.key, k.size)
				if err != nil {
					errs[i] = fmt.Errorf("archive %s: reading manifest %s: %w", a.url, k.key, err)
					continue
				}
				r.s, r.problem = readManifest(k.key, k.rel, body)
				if trim != nil && r.s.Digest != "" {
					r.trimmed = trim(&r.s)
				}
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
		return nil, err
	}
	for _, err := range errs {
		if err != nil {
			return nil, err // the first in key order
		}
	}
	return results, nil
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
