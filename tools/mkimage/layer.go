package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"time"
)

// entry is one directory or regular file of a layer.
type entry struct {
	name     string // slash-separated, relative to the image root
	mode     int64  // permission bits, with the sticky bit (01000) for /tmp
	uid, gid int
	dir      bool
	data     []byte
}

// layer is a gzip-compressed tar of entries: data is the blob, digest what
// the manifest names it by, diffID the digest of the uncompressed tar that
// the image configuration lists.
type layer struct {
	data   []byte
	digest string
	diffID string
}

// baseEntries are the files every platform's image shares: the users, the
// resolver's order, the CA roots, a writable /tmp and the user's home.
func baseEntries(caPEM []byte) []entry {
	file := func(name string, data string) entry {
		return entry{name: name, mode: 0o644, data: []byte(data)}
	}
	dir := func(name string, mode int64, owner int) entry {
		return entry{name: name, mode: mode, uid: owner, gid: owner, dir: true}
	}
	return []entry{
		dir("etc", 0o755, 0),
		file("etc/group", group),
		file("etc/nsswitch.conf", nsswitch),
		file("etc/passwd", passwd),
		dir("etc/ssl", 0o755, 0),
		dir("etc/ssl/certs", 0o755, 0),
		file(caBundle[1:], string(caPEM)),
		dir("home", 0o755, 0),
		dir(homeDir[1:], 0o700, userID),
		dir("tmp", 0o1777, 0),
	}
}

// appEntries is the binary, owned by root so that the image's user cannot
// replace it.
func appEntries(archiver, engine []byte) []entry {
	return []entry{{name: binaryPath[1:], mode: 0o755, data: archiver}, {name: engineBinaryPath[1:], mode: 0o755, data: engine}}
}

// buildLayer writes entries as a tar with every time set to mtime and no
// user or group names, then gzips it without a name or time in the gzip
// header: the same entries and mtime always give the same digests.
func buildLayer(entries []entry, mtime time.Time) (layer, error) {
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	for _, e := range entries {
		if !fs.ValidPath(e.name) || e.name == "." {
			return layer{}, fmt.Errorf("layer entry %q: not a clean relative path", e.name)
		}
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid,
			ModTime: mtime, Typeflag: tar.TypeReg, Size: int64(len(e.data)), Format: tar.FormatPAX}
		if e.dir {
			h.Name, h.Typeflag, h.Size = e.name+"/", tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return layer{}, fmt.Errorf("layer entry %s: %w", e.name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return layer{}, fmt.Errorf("layer entry %s: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return layer{}, fmt.Errorf("layer: %w", err)
	}
	diffID := sha256Digest(raw.Bytes())
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz) // header without name or ModTime
	if _, err := io.Copy(zw, &raw); err != nil {
		return layer{}, fmt.Errorf("layer: gzip: %w", err)
	}
	if err := zw.Close(); err != nil {
		return layer{}, fmt.Errorf("layer: gzip: %w", err)
	}
	return layer{data: gz.Bytes(), digest: sha256Digest(gz.Bytes()), diffID: diffID}, nil
}

// sha256Digest is data's digest in the OCI form "sha256:HEX".
func sha256Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}
