package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// moduleRoot is the directory holding the module's go.mod.
func moduleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if data, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && strings.Contains(string(data), "module github.com/ttl-archiver/archiver\n") {
			return d
		}
		if filepath.Dir(d) == d {
			t.Fatalf("no go.mod of github.com/ttl-archiver/archiver above %s", dir)
		}
	}
}

// buildArchiver builds the real archiver binary into a temporary directory.
func buildArchiver(t testing.TB) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command on $PATH to build the archiver: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "archiver")
	cmd := exec.Command(goBin, "build", "-o", bin, "./cmd/archiver")
	cmd.Dir = moduleRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/archiver: %v\n%s", err, out)
	}
	return bin
}

// cleanEnv is the test's environment without AWS_* and ARCHIVER_* settings
// (which would change what the archiver does), with the instance metadata
// service disabled and the versitygw test credentials as the default AWS
// chain's (the engine accepts any).
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "AWS_") || strings.HasPrefix(kv, "ARCHIVER_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "AWS_EC2_METADATA_DISABLED=true",
		"AWS_ACCESS_KEY_ID="+s3AccessKey, "AWS_SECRET_ACCESS_KEY="+s3SecretKey)
}

// proc is a child process whose output goes to a log file.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	termed  bool
	done    chan struct{} // closed when the process was reaped
	err     error         // Wait's result, once done
}

// startProc starts bin with args, logging to dir/name.log. t.Cleanup kills
// it if it is still running.
func startProc(t testing.TB, dir, name, bin string, args ...string) *proc {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = cleanEnv()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("starting %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL and waits until the process is gone; it reports
// whether the process was still running (killed by us) or had exited on its
// own before.
func (p *proc) kill() (wasRunning bool) {
	if p.exited() {
		return false
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true
		}
	}
	return false
}

// stop sends SIGTERM (unless the process is gone) and waits up to d; it
// returns the exit error (nil for exit code 0).
func (p *proc) stop(d time.Duration) error {
	p.term()
	return p.wait(d)
}

// term sends SIGTERM once (the archiver treats a second signal as "stop
// now" and dies of it).
func (p *proc) term() {
	if !p.exited() && !p.termed {
		p.termed = true
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
}

// wait waits up to d for the process to exit (then kills it) and returns
// the exit error (nil for exit code 0).
func (p *proc) wait(d time.Duration) error {
	select {
	case <-p.done:
		return p.err
	case <-time.After(d):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not exit within %v of SIGTERM", p.name, d)
	}
}

// tail returns the last n lines of the process's log.
func (p *proc) tail(n int) string {
	data, _ := os.ReadFile(p.logPath)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// engineEndpoint waits for the engine's "engine listening" log line and
// returns its endpoint.
func engineEndpoint(t testing.TB, p *proc) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if ep := findEndpoint(p.logPath); ep != "" {
			return ep
		}
		if p.exited() {
			t.Fatalf("engine exited before listening: %v\n%s", p.err, p.tail(20))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("engine did not log its endpoint within 30s:\n%s", p.tail(20))
	return ""
}

func findEndpoint(logPath string) string {
	f, err := os.Open(logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 1<<20))
	for sc.Scan() {
		var l struct {
			Msg      string `json:"msg"`
			Endpoint string `json:"endpoint"`
		}
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "engine listening" && l.Endpoint != "" {
			return l.Endpoint
		}
	}
	return ""
}

// keyLog is the keys a writer wrote, safe for concurrent use.
type keyLog struct {
	mu   sync.Mutex
	keys []string
}

func (k *keyLog) add(keys ...string) {
	k.mu.Lock()
	k.keys = append(k.keys, keys...)
	k.mu.Unlock()
}

func (k *keyLog) all() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.keys...)
}

// drop forgets keys (items legitimately gone, e.g. trimmed before read).
func (k *keyLog) drop(keys []string) {
	gone := make(map[string]bool, len(keys))
	for _, key := range keys {
		gone[key] = true
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	kept := k.keys[:0]
	for _, key := range k.keys {
		if !gone[key] {
			kept = append(kept, key)
		}
	}
	k.keys = kept
}
