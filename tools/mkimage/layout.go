package main

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// OCI media types (image-spec v1.1).
const (
	mediaIndex    = "application/vnd.oci.image.index.v1+json"
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"
)

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *platform         `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Variant      string `json:"variant,omitempty"`
}

type index struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType"`
	Manifests     []descriptor      `json:"manifests"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

type manifest struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType"`
	Config        descriptor        `json:"config"`
	Layers        []descriptor      `json:"layers"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

// imageConfig is the OCI image configuration, with Docker's Healthcheck in
// config as Docker writes it.
type imageConfig struct {
	Created      string          `json:"created"`
	Architecture string          `json:"architecture"`
	OS           string          `json:"os"`
	Variant      string          `json:"variant,omitempty"`
	Config       containerConfig `json:"config"`
	RootFS       struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
	History []history `json:"history"`
}

type containerConfig struct {
	User         string              `json:"User"`
	ExposedPorts map[string]struct{} `json:"ExposedPorts"`
	Env          []string            `json:"Env"`
	Entrypoint   []string            `json:"Entrypoint"`
	Cmd          []string            `json:"Cmd"`
	WorkingDir   string              `json:"WorkingDir"`
	Labels       map[string]string   `json:"Labels,omitempty"`
	Healthcheck  *healthcheck        `json:"Healthcheck,omitempty"`
}

type history struct {
	Created   string `json:"created"`
	CreatedBy string `json:"created_by"`
}

// meta is what every platform's image is stamped with.
type meta struct {
	version string    // the binary's version, also the image's label
	created time.Time // every time in the image: reproducible builds
	name    string    // NAME:TAG, the reference the archive loads as
}

// layout is an OCI image layout being assembled: its blobs by digest.
type layout struct {
	blobs map[string][]byte
}

// add stores a blob (once, however often it is added) and describes it.
func (l *layout) add(mediaType string, data []byte) descriptor {
	d := sha256Digest(data)
	if l.blobs == nil {
		l.blobs = map[string][]byte{}
	}
	l.blobs[d] = data
	return descriptor{MediaType: mediaType, Digest: d, Size: int64(len(data))}
}

// addJSON stores v as a JSON blob.
func (l *layout) addJSON(mediaType string, v any) (descriptor, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return descriptor{}, fmt.Errorf("%s: %w", mediaType, err)
	}
	return l.add(mediaType, data), nil
}

// addImage stores one platform's image (the shared base layer, then a layer
// holding binary) and returns its manifest's descriptor.
func (l *layout) addImage(p platform, base layer, archiver, engine []byte, m meta) (descriptor, error) {
	app, err := buildLayer(appEntries(archiver, engine), m.created)
	if err != nil {
		return descriptor{}, err
	}
	created := m.created.UTC().Format(time.RFC3339)
	cfg := imageConfig{Created: created, Architecture: p.Architecture, OS: p.OS, Variant: p.Variant,
		Config: containerConfig{
			User: imageUser, ExposedPorts: map[string]struct{}{metricPort: {}},
			Env: environ, Entrypoint: entrypoint, Cmd: command, WorkingDir: homeDir,
			Labels:      m.labels(),
			Healthcheck: &health,
		},
		History: []history{
			{Created: created, CreatedBy: "mkimage: users, CA roots, /tmp, " + homeDir},
			{Created: created, CreatedBy: "mkimage: " + binaryPath + " and " + engineBinaryPath + " " + m.version},
		},
	}
	cfg.RootFS.Type = "layers"
	cfg.RootFS.DiffIDs = []string{base.diffID, app.diffID}
	cd, err := l.addJSON(mediaConfig, cfg)
	if err != nil {
		return descriptor{}, err
	}
	man := manifest{SchemaVersion: 2, MediaType: mediaManifest, Config: cd,
		Layers: []descriptor{l.add(mediaLayer, base.data), l.add(mediaLayer, app.data)}}
	md, err := l.addJSON(mediaManifest, man)
	if err != nil {
		return descriptor{}, err
	}
	md.Platform = &p
	return md, nil
}

// labels are the OCI annotation keys, as labels of the configuration.
func (m meta) labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":   "ttl-archiver",
		"org.opencontainers.image.version": m.version,
		"org.opencontainers.image.created": m.created.UTC().Format(time.RFC3339),
	}
}

// write writes the layout as a tar: oci-layout, index.json naming one
// image index (the one entry tools load when given no reference; it names
// the platforms' manifests), and the blobs in digest order.
func (l *layout) write(w io.Writer, manifests []descriptor, m meta) error {
	tag := m.name[strings.LastIndex(m.name, ":")+1:]
	idx, err := l.addJSON(mediaIndex, index{SchemaVersion: 2, MediaType: mediaIndex, Manifests: manifests})
	if err != nil {
		return err
	}
	idx.Annotations = map[string]string{
		"org.opencontainers.image.ref.name": tag,    // skopeo, the OCI layout's tag
		"io.containerd.image.name":          m.name, // docker load, containerd
	}
	top, err := json.Marshal(index{SchemaVersion: 2, MediaType: mediaIndex, Manifests: []descriptor{idx}})
	if err != nil {
		return fmt.Errorf("index.json: %w", err)
	}
	tw := tar.NewWriter(w)
	put := func(name string, data []byte) error {
		h := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: m.created, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if _, err := tw.Write(data); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}
	if err := put("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	if err := put("index.json", top); err != nil {
		return err
	}
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Name: dir, Mode: 0o755, ModTime: m.created, Typeflag: tar.TypeDir, Format: tar.FormatPAX}); err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
	}
	for _, d := range slices.Sorted(maps.Keys(l.blobs)) {
		if err := put("blobs/sha256/"+strings.TrimPrefix(d, "sha256:"), l.blobs[d]); err != nil {
			return err
		}
	}
	return tw.Close()
}
