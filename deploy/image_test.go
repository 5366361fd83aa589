package deploy

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// imageVersion is the version the test stamps into the image it builds,
// and imageName its name: tagged with the version, as make image does
// (TestDeployConventions holds the Makefile to that).
const (
	imageVersion = "imagetest-1"
	imageName    = "ttl-archiver:" + imageVersion
)

// TestImage builds the amd64 image the way `make image` does (only amd64:
// a second cross-compile would double the test's time and run nothing
// more here), then checks it against the Dockerfile and, as root, runs its
// binaries inside it with chroot as the image's user: `version`, and the
// engine alone (/archiver-engine) answering ListTables and the
// archiver's `health --engine`.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the container image (a cross-compile of the archiver)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	archive := buildImage(ctx, t)
	img := readOCIArchive(t, archive, "amd64")

	t.Run("matches the Dockerfile", func(t *testing.T) {
		want, err := dockerfileContract(readFile(t, "Dockerfile"))
		if err != nil {
			t.Fatal(err)
		}
		if got := img.Config.contract(t); !reflect.DeepEqual(got, want) {
			t.Errorf("make image's configuration and deploy/Dockerfile differ:\nimage      %+v\nDockerfile %+v", got, want)
		}
	})
	root := t.TempDir()
	extract(t, img.layers, root)
	t.Run("binaries", func(t *testing.T) {
		want, err := dockerfileBinaries(readFile(t, "Dockerfile"))
		if err != nil {
			t.Fatal(err)
		}
		if got := rootExecutables(t, root); !slices.Equal(got, want) || !slices.Contains(got, img.Config.Entrypoint[0]) {
			t.Errorf("the image's programs %v, the Dockerfile copies %v, entrypoint %s", got, want, img.Config.Entrypoint[0])
		}
		for _, b := range want {
			checkBinary(t, filepath.Join(root, b))
		}
	})
	t.Run("user is not root", func(t *testing.T) { imageUser(t, root, img.Config.User) })
	t.Run("CA roots", func(t *testing.T) { checkCARoots(t, root, img.Config.Env) })
	t.Run("runs in chroot", func(t *testing.T) { runInChroot(ctx, t, root, img.Config) })
}

// buildImage runs tools/mkimage for linux/amd64 into a temporary file.
func buildImage(ctx context.Context, t *testing.T) string {
	t.Helper()
	src, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "archiver-image.tar")
	cmd := exec.CommandContext(ctx, "go", "run", ".", "-src", src, "-o", out, "-platforms", "linux/amd64", "-version", imageVersion, "-name", imageName)
	cmd.Dir = filepath.Join(src, "tools", "mkimage")
	cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH=0")
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("tools/mkimage: %v\n%s", err, b)
	}
	// make image says what it builds, that it takes a while, where the
	// image went and its size (it used to be silent for minutes).
	for _, want := range []string{"building the image " + imageName + " (version " + imageVersion + ") for linux/amd64", "a few minutes the first time",
		"linux/amd64 built in", "wrote " + out + " (", " MB, an OCI image archive of " + imageName + ")"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("tools/mkimage did not say %q:\n%s", want, b)
		}
	}
	return out
}

// containerConfig is the part of the image configuration a runtime reads
// (Docker's names; Healthcheck is Docker's extension).
type containerConfig struct {
	User         string
	ExposedPorts map[string]struct{}
	Env          []string
	Entrypoint   []string
	Cmd          []string
	WorkingDir   string
	Healthcheck  healthcheck
}

// contract is c as the Dockerfile would state it: the environment without
// PATH, which the Dockerfile's base sets.
func (c containerConfig) contract(t *testing.T) imageContract {
	env := map[string]string{}
	for _, kv := range c.Env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			t.Errorf("Env entry %q is not KEY=VALUE", kv)
		}
		if k != "PATH" {
			env[k] = v
		}
	}
	return imageContract{Entrypoint: c.Entrypoint, Cmd: c.Cmd, User: c.User, WorkingDir: c.WorkingDir,
		Env: env, ExposedPorts: slices.Sorted(maps.Keys(c.ExposedPorts)), Healthcheck: c.Healthcheck}
}

// ociImage is one platform's image: its configuration and its layers,
// uncompressed.
type ociImage struct {
	Config containerConfig
	layers [][]byte
}

type ociDescriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
	Platform  *struct {
		Architecture string `json:"architecture"`
		OS           string `json:"os"`
	} `json:"platform"`
}

// readOCIArchive reads an OCI image archive and follows index.json through
// image indexes to the linux/arch manifest, its configuration and its
// layers, checking every blob against its digest and size and every layer
// against its diff_id.
func readOCIArchive(t *testing.T, path, arch string) ociImage {
	t.Helper()
	files := tarFiles(t, path)
	if _, ok := files["oci-layout"]; !ok {
		t.Fatal("no oci-layout file")
	}
	blob := func(d ociDescriptor) []byte {
		hexDigest, ok := strings.CutPrefix(d.Digest, "sha256:")
		b, found := files["blobs/sha256/"+hexDigest]
		if !ok || !found || int64(len(b)) != d.Size || sha256Hex(b) != hexDigest {
			t.Fatalf("blob %s (%d bytes): missing, or its size or digest differs", d.Digest, d.Size)
		}
		return b
	}
	var man *ociDescriptor
	var walk func(data []byte)
	walk = func(data []byte) {
		var idx struct{ Manifests []ociDescriptor }
		if err := json.Unmarshal(data, &idx); err != nil {
			t.Fatalf("image index: %v", err)
		}
		for _, d := range idx.Manifests {
			switch {
			case d.MediaType == "application/vnd.oci.image.index.v1+json":
				walk(blob(d))
			case d.Platform != nil && d.Platform.OS == "linux" && d.Platform.Architecture == arch:
				man = &d
			}
		}
	}
	walk(files["index.json"])
	if man == nil {
		t.Fatalf("no linux/%s manifest", arch)
	}
	var m struct {
		Config ociDescriptor
		Layers []ociDescriptor
	}
	var cfg struct {
		Architecture string
		OS           string
		Config       containerConfig
		RootFS       struct {
			DiffIDs []string `json:"diff_ids"`
		}
	}
	if err := json.Unmarshal(blob(*man), &m); err != nil {
		t.Fatalf("manifest: %v", err)
	}
	if err := json.Unmarshal(blob(m.Config), &cfg); err != nil {
		t.Fatalf("image configuration: %v", err)
	}
	if cfg.OS != "linux" || cfg.Architecture != arch || len(cfg.RootFS.DiffIDs) != len(m.Layers) {
		t.Fatalf("configuration for %s/%s with %d diff_ids, manifest with %d layers", cfg.OS, cfg.Architecture, len(cfg.RootFS.DiffIDs), len(m.Layers))
	}
	img := ociImage{Config: cfg.Config}
	for i, l := range m.Layers {
		zr, err := gzip.NewReader(bytes.NewReader(blob(l)))
		if err != nil {
			t.Fatalf("layer %s: %v", l.Digest, err)
		}
		raw, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("layer %s: %v", l.Digest, err)
		}
		if "sha256:"+sha256Hex(raw) != cfg.RootFS.DiffIDs[i] {
			t.Fatalf("layer %s: uncompressed digest is not diff_id %s", l.Digest, cfg.RootFS.DiffIDs[i])
		}
		img.layers = append(img.layers, raw)
	}
	return img
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// tarFiles returns the regular files of the tar at path by name.
func tarFiles(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		if files[h.Name], err = io.ReadAll(tr); err != nil {
			t.Fatalf("%s: %s: %v", path, h.Name, err)
		}
	}
}

// extract unpacks layers in order into root with their modes and owners.
// The image holds directories and regular files only; anything else, or a
// name leaving root, fails the test.
func extract(t *testing.T, layers [][]byte, root string) {
	t.Helper()
	if err := os.Chmod(root, 0o755); err != nil { // the image's / for its user
		t.Fatal(err)
	}
	for _, l := range layers {
		tr := tar.NewReader(bytes.NewReader(l))
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			name := strings.TrimSuffix(h.Name, "/")
			if !filepath.IsLocal(name) {
				t.Fatalf("layer entry %q leaves the image root", h.Name)
			}
			p := filepath.Join(root, name)
			switch h.Typeflag {
			case tar.TypeDir:
				err = os.MkdirAll(p, 0o700)
			case tar.TypeReg:
				err = os.WriteFile(p, readAll(t, tr), 0o600)
			default:
				t.Fatalf("layer entry %q: type %q, want a directory or a regular file", h.Name, h.Typeflag)
			}
			if err == nil {
				err = syscall.Chmod(p, uint32(h.Mode)) // keeps the sticky bit, unlike os.Chmod's FileMode
			}
			if err == nil && os.Geteuid() == 0 {
				err = os.Lchown(p, h.Uid, h.Gid)
			}
			if err != nil {
				t.Fatalf("layer entry %q: %v", h.Name, err)
			}
		}
	}
}

func readAll(t *testing.T, r io.Reader) []byte {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkBinary reads the binary's build information: static, for
// linux/amd64, with the time zone database and the paths trimmed (-trimpath
// leaves -ldflags out of it: `version` in chroot checks the stamp).
func checkBinary(t *testing.T, path string) {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"CGO_ENABLED": "0", "GOOS": "linux", "GOARCH": "amd64", "-tags": "timetzdata", "-trimpath": "true"}
	for _, s := range info.Settings {
		if v, ok := want[s.Key]; ok {
			if s.Value != v {
				t.Errorf("build setting %s=%s, want %s", s.Key, s.Value, v)
			}
			delete(want, s.Key)
		}
	}
	if len(want) > 0 {
		t.Errorf("build settings missing: %v", want)
	}
}

// rootExecutables lists the executable regular files at the root of the
// extracted image, as "/NAME", sorted.
func rootExecutables(t *testing.T, root string) []string {
	t.Helper()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() && info.Mode()&0o111 != 0 {
			out = append(out, "/"+e.Name())
		}
	}
	return out // ReadDir sorts by name
}

// imageUser checks that user (UID:GID, numeric) is not root and that
// /etc/passwd and /etc/group of the image name both.
func imageUser(t *testing.T, root, user string) (uid, gid int) {
	t.Helper()
	u, g, ok := strings.Cut(user, ":")
	uid, err1 := strconv.Atoi(u)
	gid, err2 := strconv.Atoi(g)
	if !ok || err1 != nil || err2 != nil {
		t.Fatalf("image user %q is not numeric UID:GID", user)
	}
	if uid == 0 || gid == 0 {
		t.Fatalf("image user %q is root", user)
	}
	for file, id := range map[string]int{"etc/passwd": uid, "etc/group": gid} {
		found := false
		for line := range strings.Lines(readFile(t, filepath.Join(root, file))) {
			f := strings.Split(line, ":")
			found = found || len(f) > 2 && f[2] == strconv.Itoa(id)
		}
		if !found {
			t.Errorf("the image's /%s has no entry for %d", file, id)
		}
	}
	return uid, gid
}

// checkCARoots: SSL_CERT_FILE names a bundle in the image that holds
// AWS's root (Amazon Root CA 1).
func checkCARoots(t *testing.T, root string, env []string) {
	var bundle string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "SSL_CERT_FILE="); ok {
			bundle = v
		}
	}
	if bundle == "" {
		t.Fatal("no SSL_CERT_FILE in the image's environment")
	}
	rest := []byte(readFile(t, filepath.Join(root, bundle)))
	for {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			t.Fatalf("%s holds no Amazon Root CA 1: the binary could not verify AWS's endpoints", bundle)
		}
		if c, err := x509.ParseCertificate(b.Bytes); err == nil && c.Subject.CommonName == "Amazon Root CA 1" {
			return
		}
	}
}

// chrootCmd runs the image's entrypoint with args as the runtime would:
// root at root, as the image's user, in its working directory, with its
// environment and nothing of the test's.
func chrootCmd(ctx context.Context, t *testing.T, root string, c containerConfig, args ...string) *exec.Cmd {
	return chrootArgv(ctx, t, root, c, append(slices.Clone(c.Entrypoint), args...)...)
}

// chrootArgv is chrootCmd of a whole command line, as a runtime runs an
// --entrypoint override.
func chrootArgv(ctx context.Context, t *testing.T, root string, c containerConfig, argv ...string) *exec.Cmd {
	uid, gid := imageUser(t, root, c.User)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = c.Env, c.WorkingDir
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	return cmd
}

func runInChroot(ctx context.Context, t *testing.T, root string, c containerConfig) {
	if os.Geteuid() != 0 {
		t.Skip("chroot and the image's user need root: run the deploy tests as root to run the image's binary")
	}
	out, err := chrootCmd(ctx, t, root, c, "version").CombinedOutput()
	if errors.Is(err, syscall.EPERM) {
		t.Skipf("chroot is not permitted here (no CAP_SYS_CHROOT?): %v", err)
	}
	if err != nil || !strings.Contains(string(out), imageVersion) {
		t.Fatalf("archiver version: %v\n%s", err, out)
	}
	if out, err := chrootArgv(ctx, t, root, c, "/archiver-engine", "version").CombinedOutput(); err != nil || !strings.Contains(string(out), "archiver-engine "+imageVersion) {
		t.Fatalf("archiver-engine version: %v\n%s", err, out)
	}

	// The engine alone, as docs/ENGINE.md's compose service runs it.
	eng := chrootArgv(ctx, t, root, c, "/archiver-engine", "--listen", "127.0.0.1:0", "--ttl-interval", "-1s")
	stdout, err := eng.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	eng.Stderr = &stderr
	if err := eng.Start(); err != nil {
		t.Fatal(err)
	}
	endpoint := engineEndpoint(ctx, t, stdout)
	if endpoint == "" {
		_ = eng.Wait()
		t.Fatalf("the engine did not log its endpoint: %s", stderr.String())
	}
	db := dynamodb.NewFromConfig(aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")},
		func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(endpoint) })
	if _, err := db.ListTables(ctx, &dynamodb.ListTablesInput{}); err != nil {
		t.Errorf("ListTables on the engine in the image: %v", err)
	}
	// The health check a compose file gives the engine (docs/ENGINE.md).
	if out, err := chrootCmd(ctx, t, root, c, "health", "--engine", "--addr", strings.TrimPrefix(endpoint, "http://")).CombinedOutput(); err != nil {
		t.Errorf("archiver health --engine in the image: %v\n%s", err, out)
	}
	if err := eng.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := eng.Wait(); err != nil {
		t.Errorf("the engine's exit after SIGTERM: %v\n%s", err, stderr.String())
	}
}

// engineEndpoint reads the engine's JSON log until its "engine listening"
// line and returns the endpoint it names ("" when the log ends first); the
// rest of the log is drained so that the engine never blocks on it.
func engineEndpoint(ctx context.Context, t *testing.T, log io.Reader) string {
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(log)
		sent := false
		for sc.Scan() {
			var l struct{ Msg, Endpoint string }
			if !sent && json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "engine listening" && l.Endpoint != "" {
				found <- l.Endpoint
				sent = true
			}
		}
		if !sent {
			close(found)
		}
	}()
	select {
	case ep := <-found:
		return ep
	case <-ctx.Done():
		t.Fatalf("waiting for the engine's endpoint: %v", ctx.Err())
		return ""
	}
}
