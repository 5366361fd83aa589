package benchkit

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// ArchiverEnv is the environment of an archiver a section starts: this
// process's, with versitygw's credentials and no instance metadata.
func ArchiverEnv() []string {
	return append(os.Environ(), "AWS_ACCESS_KEY_ID="+S3Key, "AWS_SECRET_ACCESS_KEY="+S3Secret,
		"AWS_REGION=us-east-1", "AWS_EC2_METADATA_DISABLED=true")
}

// Scrape returns the archiver's metric samples (its --metrics-addr addr)
// whose names start with one of names, on one line.
func Scrape(addr string, names ...string) string {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		for _, n := range names {
			if strings.HasPrefix(sc.Text(), n) {
				out = append(out, sc.Text())
			}
		}
	}
	return strings.Join(out, "; ")
}

// MetricSum is the sum of the archiver's samples of metric name (0 when
// it cannot be read).
func MetricSum(addr, name string) float64 {
	sum := 0.0
	for _, line := range strings.Split(Scrape(addr, name), "; ") {
		f := strings.Fields(line)
		if len(f) < 2 || !(strings.HasPrefix(f[0], name+"{") || f[0] == name) {
			continue
		}
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// Profile waits for the archiver's metrics server at addr and saves the
// profile /debug/pprof/WHAT (e.g. "profile?seconds=4", "heap") to file.
func Profile(ctx context.Context, addr, what, file string) error {
	url := fmt.Sprintf("http://%s/debug/pprof/%s", addr, what)
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(file, b, 0o644)
}

// Progress returns a function that tells on stderr what section is doing,
// e.g. "  [pipeline 15:04:05] loading 200000 items".
func Progress(section string) func(format string, a ...any) {
	return func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "  [%s %s] %s\n", section, time.Now().Format("15:04:05"), fmt.Sprintf(format, a...))
	}
}

// Row prints one figure of a table: its name, value and a note.
func Row(w io.Writer, name, value, note string) {
	fmt.Fprintf(w, "  %-34s %14s  %s\n", name, value, note)
}
