package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// goBuild cross-compiles pkg (in the module at src) for linux/arch into
// dir and returns the binary: static (CGO_ENABLED=0), -trimpath, the time
// zone database embedded (timetzdata: the image has no /usr/share/zoneinfo),
// stripped, with the version stamped as `make build` does.
func goBuild(ctx context.Context, src, pkg, arch, version, dir string) ([]byte, error) {
	out := filepath.Join(dir, filepath.Base(pkg)+"-"+arch)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-tags", "timetzdata",
		"-ldflags", "-s -w -X main.version="+version, "-o", out, pkg)
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go build %s for linux/%s: %w\n%s", pkg, arch, err, strings.TrimSpace(stderr.String()))
	}
	return os.ReadFile(out)
}

// errNoAWSRoot is returned for a CA bundle that could not verify AWS's
// endpoints.
var errNoAWSRoot = errors.New("no Amazon Root CA certificate: the image could not verify AWS's TLS endpoints")

// checkCABundle reads a PEM bundle and makes sure every block is a
// certificate that parses and that AWS's roots are among them (AWS's
// endpoints chain to Amazon Root CA 1-4 or Starfield's G2 root).
func checkCABundle(name string, data []byte) error {
	n, aws := 0, false
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			if len(bytes.TrimSpace(rest)) > 0 {
				return fmt.Errorf("CA bundle %s: text after certificate %d is not PEM", name, n)
			}
			break
		}
		if b.Type != "CERTIFICATE" {
			return fmt.Errorf("CA bundle %s: block %d is %q, not CERTIFICATE", name, n+1, b.Type)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return fmt.Errorf("CA bundle %s: certificate %d: %w", name, n+1, err)
		}
		n++
		cn := c.Subject.CommonName
		aws = aws || strings.HasPrefix(cn, "Amazon Root CA ") || cn == "Starfield Services Root Certificate Authority - G2"
	}
	if n == 0 {
		return fmt.Errorf("CA bundle %s: no certificates", name)
	}
	if !aws {
		return fmt.Errorf("CA bundle %s: %w", name, errNoAWSRoot)
	}
	return nil
}
