// Package archive reads what the archiver's S3 and file sinks wrote: the
// objects of an s3://BUCKET/PREFIX or file://DIR archive, their archive
// lines (see [event.AppendLine]) and the events in them. It is the one
// reader of archives; `archiver verify`, `restore` and `replay` sit on it.
//
// [Open] takes the URL of the sink that wrote the archive, with the same
// parameters (endpoint=, region=, path-style=, ...; write-only ones such as
// flush-bytes= are accepted and ignored). [Archive.Objects] lists the
// objects a [Selection] may need, pruned by the key's partitions
// (table=, kind=, dt=, hr=) without reading them. [Archive.Events] streams
// their events: downloaded in parallel under a memory budget, decompressed
// (gzip, zstd or none, by Content-Encoding or extension), de-duplicated on
// the event's identity and filtered by the selection.
//
// Objects that do not follow the layout, and everything under
// PREFIX/_archiver/ and PREFIX/_manifests/, are skipped (the former
// reported to Options.OnBadKey). [Archive.Manifests] reads the coverage
// manifests under _manifests/, and [Coverage] checks the archive against
// them (`archiver verify`).
//
// [StreamRemoves] reads a table's live stream for the REMOVE records an
// archive should hold, and [MissingCheck] crosses them off against it
// (`archiver verify --table`).
package archive

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/backoff"
	"github.com/ttl-archiver/archiver/internal/redact"
	"github.com/ttl-archiver/archiver/manifest"
	"github.com/ttl-archiver/archiver/objstore"
	"github.com/ttl-archiver/archiver/sinkurl"
)

// Options configure an Archive.
type Options struct {
	// Logger receives the reader's logs (default: none).
	Logger *zap.Logger
	// Parallel is the number of downloads in flight (default 8).
	Parallel int
	// MaxBufferBytes bounds the compressed bytes downloaded and not yet
	// consumed (default 64 MiB): a download does not start while they
	// would pass it. A single group of overlapping objects (see
	// [Archive.Events]) larger than the bound is still read, alone.
	MaxBufferBytes int64
	// OnBadLine, when set, is told of every line that does not decode:
	// the object's key, the 1-based line number and the error. A body
	// that cannot be decompressed is one bad line, at the line where it
	// broke. Such lines are counted in Stats.Undecodable either way.
	OnBadLine func(object string, line int, err error)
	// OnLine, when set, sees every line that decodes, in the order Events
	// reads them, duplicates (dup) and lines outside the selection
	// included, with the object holding it: for checks of objects
	// against their keys (archiver verify). It runs on Events' goroutine
	// and must not keep l.
	OnLine func(o *Object, l *Line, dup bool)
	// OnBadKey, when set, is told of every listed key that does not
	// follow the archive layout (it is skipped), with the reason.
	OnBadKey func(key string, err error)
	// OnObject, when set, is told of every object Events reads, before
	// its lines, with the size of its stored bytes and, when HashObject
	// asks for it, their SHA-256 (before decompression), hashed from the
	// download the read makes anyway: for checks of objects against the
	// manifests that list them ([Coverage]). It runs on Events'
	// goroutine.
	OnObject func(o *Object, d Digest)
	// HashObject, when set with OnObject, says whether to hash an
	// object's stored bytes, and the lengths of its first bytes to hash
	// too, in the same pass (a file sink's file grows after a manifest
	// listed it at its size then). Events calls it on its goroutine
	// before reading.
	HashObject func(o *Object) (prefixes []int64, hash bool)
	// SkipImages leaves Keys, OldImage and NewImage out of the events:
	// lines are checked as thoroughly (a line that would not decode is
	// still reported), but items are not built, which makes reading
	// several times faster. For readers of metadata only, such as
	// archiver verify.
	SkipImages bool
	// AWSConfig loads the AWS configuration for s3:// archives, as
	// the sinks' Options.AWSConfig ([objstore.LoadAWSConfig]; default: the AWS
	// default chain).
	AWSConfig func(ctx context.Context, region string) (aws.Config, error)
	// Retry is the backoff between attempts of a failed S3 request
	// (default 200 ms to 10 s); Attempts bounds them (default 8).
	Retry    backoff.Policy
	Attempts int
}

func (o *Options) defaults() {
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Parallel <= 0 {
		o.Parallel = 8
	}
	if o.MaxBufferBytes <= 0 {
		o.MaxBufferBytes = 64 << 20
	}
	if o.Retry.Min <= 0 {
		o.Retry = backoff.Policy{Min: 200 * time.Millisecond, Max: 10 * time.Second}
	}
	if o.Attempts <= 0 {
		o.Attempts = 8
	}
}

// Selection picks events. Zero fields select everything.
type Selection struct {
	// Tables are table names (nil: every table).
	Tables []string
	// Kinds are event kinds (nil: every kind).
	Kinds []event.Kind
	// Since and Until bound the events' deletion (creation) time:
	// Since <= ApproximateCreationTime < Until; zero is open.
	Since, Until time.Time
}

// wantsTable, wantsKind and wantsTime tell whether an event passes sel.
func (sel *Selection) wantsTable(t string) bool {
	return len(sel.Tables) == 0 || slices.Contains(sel.Tables, t)
}

func (sel *Selection) wantsKind(k event.Kind) bool {
	return len(sel.Kinds) == 0 || slices.Contains(sel.Kinds, k)
}

func (sel *Selection) wantsTime(t time.Time) bool {
	return (sel.Since.IsZero() || !t.Before(sel.Since)) && (sel.Until.IsZero() || t.Before(sel.Until))
}

// wantsObject tells whether an object's partitions may hold selected
// events: its table and kind (a file sink's file has every kind) and its
// hour [Hour, Hour+1h) against [Since, Until).
func (sel *Selection) wantsObject(o *Object) bool {
	if !sel.wantsTable(o.Table) || (o.Kind != "" && !sel.wantsKind(o.Kind)) {
		return false
	}
	end := o.Hour.Add(time.Hour)
	return (sel.Since.IsZero() || end.After(sel.Since)) && (sel.Until.IsZero() || o.Hour.Before(sel.Until))
}

// store is where an archive's objects are: S3 or a directory.
type store interface {
	// list calls fn with every object key under the listing prefix sub
	// (relative to the archive's root, "" for all) and its key relative
	// to the root.
	list(ctx context.Context, sub string, fn func(key, rel string, size int64)) error
	// get returns an object's whole body and its Content-Encoding.
	get(ctx context.Context, key string, size int64) ([]byte, string, error)
	// s3 tells whether keys follow the S3 layout (for list prefixes).
	s3() bool
	// root is what keys start with before the part relative to the
	// archive's root ("PREFIX/", or "" for a directory).
	root() string
}

// Archive is an opened archive. Its methods may be called concurrently,
// but Progress describes the Events call that started last.
type Archive struct {
	o    Options
	url  string
	st   store
	prog progress
}

// Open opens an archive at s3://BUCKET/PREFIX?endpoint=..&region=..&path-style=..
// or file://DIR, taking the URL of the sink that wrote it (its syntax and
// parameters, parsed by packages objstore and sinkurl). It checks nothing remote:
// a missing bucket or directory surfaces from Objects.
func Open(ctx context.Context, rawURL string, o Options) (*Archive, error) {
	o.defaults()
	a := &Archive{o: o}
	switch {
	case strings.HasPrefix(rawURL, "s3://"):
		c, err := objstore.ParseS3URL(rawURL)
		if err != nil {
			return nil, err
		}
		client, err := objstore.NewClient(ctx, c, o.AWSConfig)
		if err != nil {
			return nil, err
		}
		a.st = &s3Store{api: client, bucket: c.Bucket, prefix: c.Prefix, o: &a.o}
		a.url = "s3://" + c.Bucket + "/" + c.Prefix
	case strings.HasPrefix(rawURL, "file://"):
		dir, err := sinkurl.ParseFileURL(rawURL)
		if err != nil {
			return nil, err
		}
		a.st = &fileStore{dir: dir}
		a.url = "file://" + dir
	default:
		return nil, fmt.Errorf("archive %q: want s3://BUCKET/PREFIX or file://DIR", redact.URL(rawURL))
	}
	return a, nil
}

// URL is the archive's location without parameters.
func (a *Archive) URL() string { return a.url }

// Objects lists the objects that may hold events of sel, sorted by key,
// pruned by their partitions: only the selected tables' (and, for the S3
// layout, kinds' and, for a range of up to 62 days, days') prefixes are
// listed, and objects whose hour lies outside [Since, Until) are dropped.
// PREFIX/_archiver/ and PREFIX/_manifests/ are skipped; keys that do
// not follow the layout are skipped and reported to Options.OnBadKey.
func (a *Archive) Objects(ctx context.Context, sel Selection) ([]Object, error) {
	var out []Object
	for _, sub := range listPrefixes(sel, a.st.s3()) {
		err := a.st.list(ctx, sub, func(key, rel string, size int64) {
			if skipDir(rel) {
				return
			}
			o, err := ParseKey(rel)
			if err != nil {
				a.o.Logger.Warn("archive object skipped: its key does not follow the layout", zap.String("key", key), zap.Error(err))
				if a.o.OnBadKey != nil {
					a.o.OnBadKey(key, err)
				}
				return
			}
			o.Key, o.Size = key, size
			if sel.wantsObject(&o) {
				out = append(out, o)
			}
		})
		if err != nil {
			return nil, err
		}
	}
	slices.SortFunc(out, func(x, y Object) int { return strings.Compare(x.Key, y.Key) })
	return slices.CompactFunc(out, func(x, y Object) bool { return x.Key == y.Key }), nil
}

// maxListDays is the longest Since..Until range listed day by day.
const maxListDays = 62

// listPrefixes returns the prefixes (relative to the root) to list for
// sel: per table and, in the S3 layout, per kind and per day when the
// range is short enough (every kind a key may name when sel names none);
// "" lists everything.
func listPrefixes(sel Selection, s3Layout bool) []string {
	if len(sel.Tables) == 0 {
		return []string{""}
	}
	days := listDays(sel)
	kinds := sel.Kinds
	if len(kinds) == 0 && days != nil {
		kinds = append(slices.Clone(event.Kinds), event.Undecodable)
	}
	var out []string
	for _, t := range sel.Tables {
		if !s3Layout {
			// A directory may hold either layout (an S3 archive copied
			// to disk): list both; a missing one lists nothing.
			out = append(out, t+"/", "table="+t+"/")
			continue
		}
		if len(kinds) == 0 {
			out = append(out, "table="+t+"/")
			continue
		}
		for _, k := range kinds {
			b := "table=" + t + "/kind=" + string(k) + "/"
			if days == nil {
				out = append(out, b)
				continue
			}
			for _, d := range days {
				out = append(out, b+"dt="+d+"/")
			}
		}
	}
	return out
}

// listDays returns the days (YYYY-MM-DD) that [Since, Until) touches, or
// nil when either end is open or the range is longer than maxListDays.
func listDays(sel Selection) []string {
	if sel.Since.IsZero() || sel.Until.IsZero() || !sel.Until.After(sel.Since) ||
		sel.Until.Sub(sel.Since) > maxListDays*24*time.Hour {
		return nil
	}
	var out []string
	d := sel.Since.UTC().Truncate(24 * time.Hour)
	for ; d.Before(sel.Until); d = d.Add(24 * time.Hour) {
		out = append(out, d.Format("2006-01-02"))
	}
	return out
}

// s3API is the part of *s3.Client the reader uses.
type s3API interface {
	ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, optFns ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
}

type s3Store struct {
	api            s3API
	bucket, prefix string
	o              *Options
}

func (s *s3Store) s3() bool { return true }

func (s *s3Store) root() string {
	if s.prefix == "" {
		return ""
	}
	return s.prefix + "/"
}

func (s *s3Store) list(ctx context.Context, sub string, fn func(key, rel string, size int64)) error {
	root := s.root()
	in := &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: aws.String(root + sub)}
	for {
		var out *s3.ListObjectsV2Output
		err := s.retry(ctx, "list s3://"+s.bucket+"/"+root+sub, func(ctx context.Context) error {
			var err error
			out, err = s.api.ListObjectsV2(ctx, in)
			return err
		})
		if err != nil {
			return err
		}
		for _, obj := range out.Contents {
			key := aws.ToString(obj.Key)
			fn(key, strings.TrimPrefix(key, root), aws.ToInt64(obj.Size))
		}
		if !aws.ToBool(out.IsTruncated) || out.NextContinuationToken == nil {
			return nil
		}
		in.ContinuationToken = out.NextContinuationToken
	}
}

func (s *s3Store) get(ctx context.Context, key string, size int64) ([]byte, string, error) {
	var body []byte
	var enc string
	err := s.retry(ctx, "get s3://"+s.bucket+"/"+key, func(ctx context.Context) error {
		out, err := s.api.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
		if err != nil {
			return err
		}
		defer out.Body.Close()
		buf := make([]byte, 0, max(size, aws.ToInt64(out.ContentLength))+bytesSlack)
		w := bytesWriter{buf}
		if _, err := io.Copy(&w, out.Body); err != nil {
			return err
		}
		body, enc = w.b, aws.ToString(out.ContentEncoding)
		return nil
	})
	return body, enc, err
}

// bytesSlack lets io.Copy see EOF without growing the buffer.
const bytesSlack = 512

type bytesWriter struct{ b []byte }

func (w *bytesWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// retry runs call until it succeeds, fails for good (a 4xx other than
// 408 and 429, or ctx ending) or Options.Attempts ran out.
func (s *s3Store) retry(ctx context.Context, what string, call func(context.Context) error) error {
	for attempt := 1; ; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		err := call(cctx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !retryable(err) || attempt >= s.o.Attempts {
			return fmt.Errorf("%s (attempt %d): %w", what, attempt, err)
		}
		s.o.Logger.Warn("s3 request failed; retrying", zap.String("request", what), zap.Int("attempt", attempt), zap.Error(err))
		if !backoff.Sleep(ctx, s.o.Retry.Delay(attempt-1)) {
			return ctx.Err()
		}
	}
}

// retryable: everything but an answer no retry changes (3xx and 4xx other
// than 408 Request Timeout and 429 Too Many Requests).
func retryable(err error) bool {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		code := re.HTTPStatusCode()
		return code >= 500 || code == http.StatusRequestTimeout || code == http.StatusTooManyRequests
	}
	return true
}

type fileStore struct{ dir string }

func (f *fileStore) s3() bool { return false }

func (f *fileStore) root() string { return "" }

// unfinishedWrite reports whether name is a file sink's write in
// progress (.NAME.tmp: written, fsynced, then renamed to NAME). One left
// by a crash was never acknowledged, so its events were delivered again
// and written under NAME; it is no part of the archive, nor a stray key.
func unfinishedWrite(name string) bool {
	return strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".tmp") && len(name) > len("..tmp")
}

func (f *fileStore) list(_ context.Context, sub string, fn func(key, rel string, size int64)) error {
	root := filepath.Join(f.dir, filepath.FromSlash(sub))
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, os.ErrNotExist) && p == root && sub != "" {
				return nil // no such table
			}
			return err
		}
		rel, rerr := filepath.Rel(f.dir, p)
		if rerr != nil {
			return rerr
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == archiverDir || (rel+"/" == manifest.Dir && sub == "") {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Mode().IsRegular() && !unfinishedWrite(d.Name()) {
			fn(rel, rel, info.Size())
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("archive file://%s: %w", f.dir, err)
	}
	return nil
}

func (f *fileStore) get(_ context.Context, key string, _ int64) ([]byte, string, error) {
	b, err := os.ReadFile(filepath.Join(f.dir, filepath.FromSlash(key)))
	return b, "", err
}

// progress holds the counters of the running Events call.
type progress struct {
	objectsTotal, objectsDone, bytesTotal, bytesDone, events atomic.Int64
}

// start resets the counters for a read of objs.
func (p *progress) start(objs []Object) {
	var size int64
	for _, o := range objs {
		size += o.Size
	}
	p.objectsDone.Store(0)
	p.bytesDone.Store(0)
	p.events.Store(0)
	p.objectsTotal.Store(int64(len(objs)))
	p.bytesTotal.Store(size)
}

// Progress is how far the running (or last) Events call got.
type Progress struct {
	ObjectsDone, ObjectsTotal int64
	// BytesDone and BytesTotal count compressed bytes.
	BytesDone, BytesTotal int64
	// Events counts the events passed to fn so far.
	Events int64
}

// Progress returns the counters of the Events call that started last; it
// may be called from any goroutine while Events runs.
func (a *Archive) Progress() Progress {
	p := &a.prog
	return Progress{
		ObjectsDone: p.objectsDone.Load(), ObjectsTotal: p.objectsTotal.Load(),
		BytesDone: p.bytesDone.Load(), BytesTotal: p.bytesTotal.Load(),
		Events: p.events.Load(),
	}
}
