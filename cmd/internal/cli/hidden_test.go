package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestTakeHiddenFlag(t *testing.T) {
	for _, tc := range []struct {
		name      string
		args      []string
		wantRest  []string
		wantValue string
		wantErr   string
	}{
		{"absent", []string{"--listen", "x"}, []string{"--listen", "x"}, "", ""},
		{"two dashes, separate value", []string{"--listen", "x", "--cpuprofile", "p.out"}, []string{"--listen", "x"}, "p.out", ""},
		{"one dash, equals", []string{"-cpuprofile=p.out", "--listen", "x"}, []string{"--listen", "x"}, "p.out", ""},
		{"last one wins", []string{"--cpuprofile=a", "--cpuprofile", "b"}, nil, "b", ""},
		{"a value that looks like the flag stays", []string{"--region", "cpuprofile"}, []string{"--region", "cpuprofile"}, "", ""},
		{"after -- is left alone", []string{"--", "--cpuprofile", "p"}, []string{"--", "--cpuprofile", "p"}, "", ""},
		{"missing value", []string{"--cpuprofile"}, nil, "", "flag needs an argument: --cpuprofile"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rest, value, err := TakeHiddenFlag(tc.args, "cpuprofile")
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || value != tc.wantValue || !slices.Equal(rest, tc.wantRest) {
				t.Fatalf("got %q, %q, %v; want %q, %q", rest, value, err, tc.wantRest, tc.wantValue)
			}
		})
	}
}

// TestStartCPUProfile: "" profiles nothing; a file is written once stopped;
// a file that cannot be created is an error naming the flag.
func TestStartCPUProfile(t *testing.T) {
	stop, err := StartCPUProfile("")
	if err != nil {
		t.Fatal(err)
	}
	stop()
	file := filepath.Join(t.TempDir(), "cpu.out")
	if stop, err = StartCPUProfile(file); err != nil {
		t.Fatal(err)
	}
	stop()
	if fi, err := os.Stat(file); err != nil || fi.Size() == 0 {
		t.Fatalf("profile not written: %v", err)
	}
	if _, err := StartCPUProfile(filepath.Join(t.TempDir(), "no", "such", "dir")); err == nil || !strings.Contains(err.Error(), "--cpuprofile") {
		t.Fatalf("uncreatable file: %v, want an error naming --cpuprofile", err)
	}
}
