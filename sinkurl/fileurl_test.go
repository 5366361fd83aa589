package sinkurl

import (
	"net/url"
	"strings"
	"testing"
)

// TestFilePath: a file:// URL is absolute, or explicitly relative (./, ../),
// or refused with the URL it probably meant.
func TestFilePath(t *testing.T) {
	cases := []struct {
		url, want, err string
	}{
		{url: "file:///tmp/x", want: "/tmp/x"},
		{url: "file://localhost/var/lib/a.json", want: "/var/lib/a.json"},
		{url: "file://./out", want: "./out"},
		{url: "file://../out/x", want: "../out/x"},
		{url: "file://.", want: "."},
		{url: "file://tmp/x", err: `"tmp" would be a host name: want file:///tmp/x (absolute) or file://./tmp/x`},
		{url: "file://cp.json", err: "want file:///cp.json"},
		{url: "file://", err: "missing path"},
	}
	for _, c := range cases {
		u, err := url.Parse(c.url)
		if err != nil {
			t.Fatal(err)
		}
		got, err := FilePath(u)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: got %q, %v; want an error saying %s", c.url, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: got %q, %v; want %q", c.url, got, err, c.want)
		}
	}
	if _, err := ParseFileURL("file://tmp/archive"); err == nil || !strings.Contains(err.Error(), "file:///tmp/archive") {
		t.Errorf("ParseFileURL(file://tmp/archive) = %v, want it refused suggesting file:///tmp/archive", err)
	}
}
