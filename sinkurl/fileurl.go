package sinkurl

import (
	"errors"
	"fmt"
	"net/url"
)

// FilePath is the path a file:// URL names: the one reading of file URLs
// for the file sink, archives and file checkpoints. file:///ABS/PATH (and
// file://localhost/ABS/PATH) is absolute; file://./REL and file://../REL
// are relative to the working directory. Any other host is refused:
// file://tmp/x names the host "tmp", and reading it as the relative path
// tmp/x would quietly write somewhere file:///tmp/x did not mean.
func FilePath(u *url.URL) (string, error) {
	switch u.Host {
	case "", "localhost":
		if u.Path == "" {
			return "", errors.New("missing path: want file:///ABSOLUTE/PATH or file://./RELATIVE/PATH")
		}
		return u.Path, nil
	case ".", "..":
		return u.Host + u.Path, nil
	}
	return "", fmt.Errorf("%q would be a host name: want file:///%s%s (absolute) or file://./%s%s (relative to the working directory)",
		u.Host, u.Host, u.Path, u.Host, u.Path)
}
