package housetest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// executableMagic are the first bytes of the executables a build leaves
// behind: ELF, Mach-O (both byte orders, 32 and 64 bits, universal) and PE.
var executableMagic = [][]byte{
	[]byte("\x7fELF"),
	{0xfe, 0xed, 0xfa, 0xce}, {0xce, 0xfa, 0xed, 0xfe},
	{0xfe, 0xed, 0xfa, 0xcf}, {0xcf, 0xfa, 0xed, 0xfe},
	{0xca, 0xfe, 0xba, 0xbe},
	[]byte("MZ"),
}

// TestNoExecutablesCommitted: no file git tracks is a compiled program
// (a `go build` in a command's folder leaves one beside its sources; one
// was committed once). Skipped outside a git checkout.
func TestNoExecutablesCommitted(t *testing.T) {
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("not a git checkout, or no git: %v", err)
	}
	files := 0
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		f, err := os.Open(filepath.Join(root, name))
		if err != nil {
			continue // deleted in the work tree
		}
		head := make([]byte, 4)
		n, _ := f.Read(head)
		f.Close()
		files++
		for _, m := range executableMagic {
			if n >= len(m) && bytes.Equal(head[:len(m)], m) {
				t.Errorf("%s is a compiled program; remove it (git rm --cached) and ignore it", name)
				break
			}
		}
	}
	if files < 100 {
		t.Fatalf("read %d tracked files; the walk is broken", files)
	}
}
