package main

import (
	"archive/tar"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"strings"
	"testing"
	"time"
)

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		epoch   string
		wantErr string
		check   func(t *testing.T, o options)
	}{
		{name: "defaults", check: func(t *testing.T, o options) {
			if len(o.platforms) != 2 || o.platforms[1].Variant != "v8" || !o.meta.created.Equal(time.Unix(0, 0)) || o.meta.name != "ttl-archiver:dev" {
				t.Errorf("platforms %+v, created %v, name %q", o.platforms, o.meta.created, o.meta.name)
			}
		}},
		{name: "the tag is the version", args: []string{"-version", "v1.2.3-4-gabcdef0-dirty"}, check: func(t *testing.T, o options) {
			if o.meta.name != "ttl-archiver:v1.2.3-4-gabcdef0-dirty" {
				t.Errorf("name %q", o.meta.name)
			}
		}},
		{name: "a name given", args: []string{"-version", "v1.2.3", "-name", "registry.example/archiver:v1.2.3"}, check: func(t *testing.T, o options) {
			if o.meta.name != "registry.example/archiver:v1.2.3" {
				t.Errorf("name %q", o.meta.name)
			}
		}},
		{name: "a version that is no tag", args: []string{"-version", "1.0+build"}, wantErr: "give -name, or a -version that can be a tag"},
		{name: "source date epoch", epoch: "1700000000", args: []string{"-platforms", "linux/amd64"}, check: func(t *testing.T, o options) {
			if len(o.platforms) != 1 || !o.meta.created.Equal(time.Unix(1700000000, 0)) {
				t.Errorf("platforms %+v, created %v", o.platforms, o.meta.created)
			}
		}},
		{name: "unknown platform", args: []string{"-platforms", "linux/amd64,windows/amd64"}, wantErr: `-platforms: "windows/amd64"`},
		{name: "name without tag", args: []string{"-name", "ttl-archiver"}, wantErr: "-name:"},
		{name: "tag with a slash", args: []string{"-name", "registry:5000/x"}, wantErr: "-name:"},
		{name: "version with a space", args: []string{"-version", "a b"}, wantErr: "-version:"},
		{name: "bad epoch", epoch: "yesterday", wantErr: "SOURCE_DATE_EPOCH:"},
		{name: "argument", args: []string{"extra"}, wantErr: `unexpected argument "extra"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(k string) string {
				if k == "SOURCE_DATE_EPOCH" {
					return tc.epoch
				}
				return ""
			}
			o, err := parseFlags(tc.args, getenv, io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, o)
		})
	}
}

// selfSigned is a PEM certificate whose subject's common name is cn.
func selfSigned(t *testing.T, cn string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Unix(0, 0), NotAfter: time.Unix(1<<33, 0), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestCheckCABundle(t *testing.T) {
	amazon, other := selfSigned(t, "Amazon Root CA 1"), selfSigned(t, "Some Root")
	for _, tc := range []struct {
		name    string
		data    []byte
		wantErr string
		is      error
	}{
		{name: "amazon among others", data: append(append([]byte{}, other...), amazon...)},
		{name: "empty", data: nil, wantErr: "no certificates"},
		{name: "no amazon root", data: other, is: errNoAWSRoot},
		{name: "a key", data: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}}), wantErr: `block 1 is "PRIVATE KEY"`},
		{name: "garbage after", data: append(append([]byte{}, amazon...), "junk"...), wantErr: "not PEM"},
		{name: "broken certificate", data: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1, 2}}), wantErr: "certificate 1:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkCABundle("ca.pem", tc.data)
			switch {
			case tc.is != nil:
				if !errors.Is(err, tc.is) {
					t.Fatalf("err %v, want %v", err, tc.is)
				}
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tc.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			}
		})
	}
}

// buildArchive assembles an archive for both platforms from fake binaries.
func buildArchive(t *testing.T, m meta) []byte {
	t.Helper()
	base, err := buildLayer(baseEntries([]byte("roots")), m.created)
	if err != nil {
		t.Fatal(err)
	}
	var l layout
	var ds []descriptor
	for _, p := range []platform{archs["linux/amd64"], archs["linux/arm64"]} {
		d, err := l.addImage(p, base, []byte("binary for "+p.Architecture), []byte("engine for "+p.Architecture), m)
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	var buf bytes.Buffer
	if err := l.write(&buf, ds, m); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// readArchive returns the archive's regular files by name, checking that
// every blob's name is its digest.
func readArchive(t *testing.T, data []byte) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		if hex, ok := strings.CutPrefix(h.Name, "blobs/sha256/"); ok && sha256Digest(b) != "sha256:"+hex {
			t.Errorf("blob %s has digest %s", h.Name, sha256Digest(b))
		}
		files[h.Name] = b
	}
}

func decode(t *testing.T, files map[string][]byte, d descriptor, v any) {
	t.Helper()
	b, ok := files["blobs/sha256/"+strings.TrimPrefix(d.Digest, "sha256:")]
	if !ok || int64(len(b)) != d.Size {
		t.Fatalf("blob %s: present %v, %d bytes, descriptor says %d", d.Digest, ok, len(b), d.Size)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

// TestArchiveLayout follows index.json to both platforms' manifests and
// configurations, and checks that the same input gives the same bytes.
func TestArchiveLayout(t *testing.T) {
	m := meta{version: "v1.2.3", created: time.Unix(1700000000, 0), name: "ttl-archiver:v1"}
	data := buildArchive(t, m)
	if !bytes.Equal(data, buildArchive(t, m)) {
		t.Error("two builds of the same input differ")
	}
	files := readArchive(t, data)
	if got := string(files["oci-layout"]); got != `{"imageLayoutVersion":"1.0.0"}` {
		t.Errorf("oci-layout %s", got)
	}
	var top, idx index
	if err := json.Unmarshal(files["index.json"], &top); err != nil {
		t.Fatal(err)
	}
	if len(top.Manifests) != 1 || top.Manifests[0].MediaType != mediaIndex || top.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "v1" {
		t.Fatalf("index.json: %+v", top)
	}
	decode(t, files, top.Manifests[0], &idx)
	if len(idx.Manifests) != 2 {
		t.Fatalf("image index has %d manifests", len(idx.Manifests))
	}
	var baseDigests []string
	for _, d := range idx.Manifests {
		var man manifest
		var cfg imageConfig
		decode(t, files, d, &man)
		decode(t, files, man.Config, &cfg)
		if d.Platform == nil || cfg.Architecture != d.Platform.Architecture || cfg.OS != "linux" {
			t.Errorf("platform %+v, config %s/%s", d.Platform, cfg.OS, cfg.Architecture)
		}
		if len(man.Layers) != 2 || len(cfg.RootFS.DiffIDs) != 2 {
			t.Fatalf("%d layers, %d diff_ids", len(man.Layers), len(cfg.RootFS.DiffIDs))
		}
		baseDigests = append(baseDigests, man.Layers[0].Digest)
		c := cfg.Config
		if c.User != imageUser || c.Entrypoint[0] != binaryPath || c.Healthcheck == nil || c.Healthcheck.Interval != 30*time.Second || c.Labels["org.opencontainers.image.version"] != "v1.2.3" {
			t.Errorf("config %+v", c)
		}
		if cfg.Created != "2023-11-14T22:13:20Z" {
			t.Errorf("created %s", cfg.Created)
		}
	}
	if baseDigests[0] != baseDigests[1] {
		t.Errorf("the platforms' base layers differ: %v", baseDigests)
	}
}

func TestBuildLayerRefusesUncleanNames(t *testing.T) {
	for _, name := range []string{"/etc/passwd", "../x", "a/../b", ".", "a/"} {
		if _, err := buildLayer([]entry{{name: name}}, time.Unix(0, 0)); err == nil {
			t.Errorf("%q: no error", name)
		}
	}
}
