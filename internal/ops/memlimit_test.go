package ops

import (
	"os"
	"path/filepath"
	"testing"
)

func TestContainerMemoryLimit(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name  string
		files []string
		want  int64
	}{
		{"v2 number", []string{write("v2", "1073741824\n")}, 1 << 30},
		{"v2 unlimited", []string{write("v2max", "max\n")}, 0},
		{"v1 fallback", []string{filepath.Join(dir, "missing"), write("v1", "536870912")}, 512 << 20},
		{"v1 unlimited", []string{write("v1big", "9223372036854771712")}, 0},
		{"garbage", []string{write("bad", "lots")}, 0},
		{"none", nil, 0},
	}
	for _, tc := range cases {
		if got := ContainerMemoryLimit(tc.files); got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.name, got, tc.want)
		}
	}
}
