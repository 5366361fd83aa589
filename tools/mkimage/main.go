// Command mkimage writes the archiver's container image as an OCI image
// archive (an OCI image layout in a tar, its index.json naming one image
// index of every platform's manifest) without a Docker engine and without
// pulling a base image: each platform's image is a shared base layer (users,
// CA roots, /tmp, the user's home) and the static binaries (/archiver and
// the engine alone, /archiver-engine), with the contract
// of deploy/Dockerfile (entrypoint, user, health check, port, environment,
// working directory). `make image` runs it.
//
// It writes the layout with the standard library (archive/tar, gzip,
// sha256) instead of go-containerregistry: the format is three files and
// content-addressed blobs, a few hundred lines, and this way the tools
// module pulls in nothing new.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

// options are mkimage's flags, checked.
type options struct {
	out, src, pkg, enginePkg, caFile string
	platforms                        []platform
	meta                             meta
}

// archs are the platforms mkimage builds for, as GOARCH and OCI platform.
var archs = map[string]platform{
	"linux/amd64": {OS: "linux", Architecture: "amd64"},
	"linux/arm64": {OS: "linux", Architecture: "arm64", Variant: "v8"},
}

// tagRE is the grammar of a reference's tag.
var tagRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$`)

func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("mkimage", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.out, "o", "bin/archiver-image.tar", "the OCI image archive to write")
	fs.StringVar(&o.src, "src", ".", "the archiver's module root")
	fs.StringVar(&o.pkg, "pkg", "./cmd/archiver", "the package to build as "+binaryPath+", relative to -src")
	fs.StringVar(&o.enginePkg, "engine-pkg", "./cmd/archiver-engine", "the package to build as "+engineBinaryPath+", relative to -src")
	fs.StringVar(&o.caFile, "ca-certs", "/etc/ssl/certs/ca-certificates.crt", "PEM bundle of CA roots to put in the image (must hold AWS's)")
	plats := fs.String("platforms", "linux/amd64,linux/arm64", "comma-separated OS/ARCH: linux/amd64, linux/arm64")
	fs.StringVar(&o.meta.version, "version", "dev", "version stamped into the binary (main.version) and the image's labels")
	fs.StringVar(&o.meta.name, "name", "", "NAME:TAG the archive loads as (default ttl-archiver:VERSION, the -version: one tag per build, never latest)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	nameHint := ""
	if o.meta.name == "" {
		o.meta.name = "ttl-archiver:" + o.meta.version
		nameHint = " (the default ttl-archiver:VERSION: give -name, or a -version that can be a tag)"
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	var probs []error
	for p := range strings.SplitSeq(*plats, ",") {
		pl, ok := archs[strings.TrimSpace(p)]
		if !ok {
			probs = append(probs, fmt.Errorf("-platforms: %q is not linux/amd64 or linux/arm64", p))
			continue
		}
		o.platforms = append(o.platforms, pl)
	}
	if i := strings.LastIndex(o.meta.name, ":"); i <= 0 || !tagRE.MatchString(o.meta.name[i+1:]) || strings.Contains(o.meta.name[i+1:], "/") {
		probs = append(probs, fmt.Errorf("-name: %q is not NAME:TAG%s", o.meta.name, nameHint))
	}
	if o.meta.version == "" || strings.ContainsAny(o.meta.version, " \t\n'\"") {
		probs = append(probs, fmt.Errorf("-version: %q must be one word", o.meta.version))
	}
	// SOURCE_DATE_EPOCH (reproducible-builds.org): every time in the image.
	if s := getenv("SOURCE_DATE_EPOCH"); s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil || sec < 0 {
			probs = append(probs, fmt.Errorf("SOURCE_DATE_EPOCH: %q is not seconds since 1970", s))
		}
		o.meta.created = time.Unix(sec, 0).UTC()
	} else {
		o.meta.created = time.Unix(0, 0).UTC()
	}
	return o, errors.Join(probs...)
}

func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	o, err := parseFlags(args, getenv, stderr)
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(o.caFile)
	if err != nil {
		return fmt.Errorf("-ca-certs: %w", err)
	}
	if err := checkCABundle(o.caFile, ca); err != nil {
		return fmt.Errorf("-ca-certs: %w", err)
	}
	base, err := buildLayer(baseEntries(ca), o.meta.created)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "mkimage-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	began := time.Now()
	fmt.Fprintf(stderr, "mkimage: building the image %s (version %s) for %s: each platform is a cross-compile of the archiver and the engine,\n"+
		"  a few minutes the first time, seconds once Go's build cache holds it\n", o.meta.name, o.meta.version, platformList(o.platforms))
	var l layout
	var manifests []descriptor
	for _, p := range o.platforms {
		start := time.Now()
		bin, err := goBuild(ctx, o.src, o.pkg, p.Architecture, o.meta.version, tmp)
		if err != nil {
			return err
		}
		eng, err := goBuild(ctx, o.src, o.enginePkg, p.Architecture, o.meta.version, tmp)
		if err != nil {
			return err
		}
		d, err := l.addImage(p, base, bin, eng, o.meta)
		if err != nil {
			return fmt.Errorf("linux/%s: %w", p.Architecture, err)
		}
		manifests = append(manifests, d)
		fmt.Fprintf(stderr, "mkimage: linux/%s built in %s\n", p.Architecture, time.Since(start).Round(100*time.Millisecond))
	}
	if err := writeFile(o.out, func(w io.Writer) error { return l.write(w, manifests, o.meta) }); err != nil {
		return err
	}
	size := int64(0)
	if fi, err := os.Stat(o.out); err == nil {
		size = fi.Size()
	}
	fmt.Fprintf(stderr, "mkimage: wrote %s (%.1f MB, an OCI image archive of %s) in %s; push it as deploy/README.md says (section 2)\n",
		o.out, float64(size)/1e6, o.meta.name, time.Since(began).Round(100*time.Millisecond))
	return nil
}

// platformList names the platforms, as -platforms takes them.
func platformList(ps []platform) string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.OS + "/" + p.Architecture
	}
	return strings.Join(names, ", ")
}

// writeFile writes path through a temporary file in its directory, renamed
// into place only when fill succeeded: a failed build leaves no half image.
func writeFile(path string, fill func(io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".mkimage-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := fill(f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
