package archive_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ttl-archiver/archiver/archive"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/s3test"
	"github.com/ttl-archiver/archiver/manifest"
)

func hexSHA(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// testManifest is a manifest of shard s1 of table T's stream up to to,
// listing objs.
func testManifest(to string, objs ...manifest.Object) manifest.Manifest {
	r := manifest.Range{StreamARN: "arn:aws:dynamodb:us-east-1:000000000000:table/T/stream/2026-03-04T00:00:00.000", Region: "us-east-1",
		Table: "T", ShardID: "s1", To: to, Records: 1, Events: map[event.Kind]int64{event.Expired: 1}}
	return manifest.New(r, objs, "", "w", t0)
}

// TestReaderSkipsManifests: the data reader takes nothing under
// _manifests/ for data: no object, no stray key, in S3 or a directory.
func TestReaderSkipsManifests(t *testing.T) {
	srv := s3test.Start(t)
	m := manifest.Encode(testManifest("5"))
	dir := t.TempDir()
	for _, url := range []string{s3URL(srv, "m", ""), "file://" + dir} {
		t.Run(strings.SplitN(url, ":", 2)[0], func(t *testing.T) {
			write(t, url, events("T", "s1", event.Expired, 0, 5, 0))
			for key, body := range map[string][]byte{manifest.Key(testManifest("5")): m, "_manifests/notes.txt": []byte("x")} {
				if strings.HasPrefix(url, "s3:") {
					put(t, srv, "m/"+key, body)
					continue
				}
				p := filepath.Join(dir, filepath.FromSlash(key))
				os.MkdirAll(filepath.Dir(p), 0o755)
				os.WriteFile(p, body, 0o644)
			}
			var stray []string
			a := open(t, url, archive.Options{OnBadKey: func(key string, _ error) { stray = append(stray, key) }})
			got, st := readAll(t, a, archive.Selection{})
			if len(got) != 5 || st.Objects != 1 || len(stray) != 0 {
				t.Errorf("events %d, stats %+v, stray keys %v", len(got), st, stray)
			}
			set, err := a.Manifests(testCtx(t))
			if err != nil || len(set.Stored) != 1 || set.Stored[0].Digest != manifest.Digest(m) || len(set.Other) != 1 || len(set.Bad) != 0 {
				t.Errorf("manifests %+v, %v", set, err)
			}
		})
	}
}

// TestObjectDigests: OnObject is told the size and SHA-256 of every
// object's stored bytes (an S3 object gzip-compressed as stored) and the
// digests of the prefixes DigestPrefixes asks for, from the one download.
func TestObjectDigests(t *testing.T) {
	srv := s3test.Start(t)
	url := s3URL(srv, "d", "")
	write(t, url, events("T", "s1", event.Expired, 0, 50, 0), events("T", "s2", event.Expired, 0, 50, 0))
	got := map[string]archive.Digest{}
	a := open(t, url, archive.Options{
		OnObject: func(o *archive.Object, d archive.Digest) { got[o.Key] = d },
		HashObject: func(o *archive.Object) ([]int64, bool) {
			return []int64{o.Size + 5, 10, 3, 10, -1}, o.Shard == "s1"
		},
	})
	readAll(t, a, archive.Selection{})
	if len(got) != 2 {
		t.Fatalf("digests of %d objects, want 2", len(got))
	}
	for key, d := range got {
		if !strings.Contains(key, "/s2-") {
			continue
		}
		if d.Size == 0 || d.SHA256 != "" || d.Prefixes != nil {
			t.Errorf("%s, not to be hashed: digest %+v", key, d)
		}
		delete(got, key)
	}
	for key, d := range got {
		out, err := srv.Client.GetObject(testCtx(t), &s3.GetObjectInput{Bucket: aws.String(s3test.Bucket), Key: aws.String(key)})
		if err != nil {
			t.Fatal(err)
		}
		stored, _ := io.ReadAll(out.Body)
		out.Body.Close()
		if stored[0] != 0x1f || d.Size != int64(len(stored)) || d.SHA256 != hexSHA(stored) {
			t.Errorf("%s: digest %+v; stored %d bytes (gzip: %v), SHA-256 %s", key, d, len(stored), stored[0] == 0x1f, hexSHA(stored))
		}
		if len(d.Prefixes) != 2 || d.Prefixes[3] != hexSHA(stored[:3]) || d.Prefixes[10] != hexSHA(stored[:10]) {
			t.Errorf("%s: prefixes %v", key, d.Prefixes)
		}
	}
}
