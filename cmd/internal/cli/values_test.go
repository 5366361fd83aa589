package cli

import "testing"

func TestIsRegion(t *testing.T) {
	for s, want := range map[string]bool{"us-east-1": true, "ap-southeast-2": true, "us-gov-west-1": true,
		"": false, "us-east": false, "US-EAST-1": false, "useast1": false, "us-east-1 ": false} {
		if IsRegion(s) != want {
			t.Errorf("IsRegion(%q) = %v, want %v", s, !want, want)
		}
	}
}

func TestIsLoopbackHost(t *testing.T) {
	for h, want := range map[string]bool{"localhost": true, "LOCALHOST": true, "127.0.0.1": true, "127.1.2.3": true,
		"::1": true, "[::1]": true, "": false, "0.0.0.0": false, "10.0.0.1": false, "engine": false, "::": false} {
		if IsLoopbackHost(h) != want {
			t.Errorf("IsLoopbackHost(%q) = %v, want %v", h, !want, want)
		}
	}
}
