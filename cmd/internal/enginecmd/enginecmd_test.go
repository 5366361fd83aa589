package enginecmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ttl-archiver/archiver/cmd/internal/cli"
	"github.com/ttl-archiver/archiver/engine/enginetest"
)

func TestParseCIDRs(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
		err  string
	}{
		{"", nil, ""},
		{" , ", nil, ""},
		{"10.0.0.0/8", []string{"10.0.0.0/8"}, ""},
		{"10.1.2.3/8, fd00::/8", []string{"10.0.0.0/8", "fd00::/8"}, ""},
		{"192.0.2.7", []string{"192.0.2.7/32"}, ""},
		{"2001:db8::1", []string{"2001:db8::1/128"}, ""},
		{"::ffff:10.0.0.0/104", []string{"10.0.0.0/8"}, ""},
		{"10.0.0.0/33", nil, `"10.0.0.0/33" is not a CIDR`},
		{"10.0.0.0/8,example.com", nil, `"example.com" is not a CIDR`},
	} {
		got, err := parseCIDRs(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("parseCIDRs(%q): %v, want an error containing %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseCIDRs(%q): %v", c.in, err)
			continue
		}
		var s []string
		for _, p := range got {
			s = append(s, p.String())
		}
		if !slices.Equal(s, c.want) {
			t.Errorf("parseCIDRs(%q) = %v, want %v", c.in, s, c.want)
		}
	}
}

func TestRunControlFromInvalid(t *testing.T) {
	err := Run(t.Context(), "archiver engine", []string{"--control-from", "10.0.0.0/8,nope"}, io.Discard)
	var ue *cli.UsageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), `--control-from: "nope" is not a CIDR`) {
		t.Fatalf("engine --control-from nope: %v, want a usage error naming the flag", err)
	}
}

// TestTTLIntervalFlag: --ttl-interval takes a Go duration and -1 (no
// sweeper, as the help says); another number without a unit is a usage
// error naming the forms it takes, before anything listens.
func TestTTLIntervalFlag(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		err  string
	}{
		{"-1", -time.Second, ""},
		{" -1 ", -time.Second, ""},
		{"-1s", -time.Second, ""},
		{"-5m", -5 * time.Minute, ""},
		{"500ms", 500 * time.Millisecond, ""},
		{"0", 0, ""},
		{"5", 0, `"5" has no unit: want a duration like 1s or 500ms, or -1 for no sweeper`},
		{"-2", 0, `"-2" has no unit`},
		{"1.5", 0, `"1.5" has no unit`},
		{"soon", 0, `"soon": want a duration like 1s or 500ms, or -1 for no sweeper`},
	} {
		var f ttlIntervalFlag
		err := f.Set(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Set(%q): %v, want an error containing %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || time.Duration(f) != c.want {
			t.Errorf("Set(%q) = %v, %v; want %v", c.in, time.Duration(f), err, c.want)
		}
	}
	err := Run(t.Context(), "archiver engine", []string{"--listen", "127.0.0.1:0", "--ttl-interval", "5"}, io.Discard)
	var ue *cli.UsageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "-ttl-interval") || !strings.Contains(err.Error(), "-1 for no sweeper") {
		t.Fatalf("engine --ttl-interval 5: %v, want a usage error naming the flag and -1", err)
	}
}

// TestRunManualClock starts `archiver engine --manual-clock` and
// moves its clock over the control API; without the flag the clock
// refuses to move.
func TestRunManualClock(t *testing.T) {
	for _, manual := range []bool{true, false} {
		args := []string{"--ttl-interval", "-1", "--log-level", "error"}
		if manual {
			args = append(args, "--manual-clock", "--control-from", "10.0.0.0/8")
		}
		addr, stop := startEngine(t, args)
		resp, err := http.Post("http://"+addr+"/_engine/clock", "application/json", strings.NewReader(`{"advance": "1h"}`))
		if err != nil {
			stop()
			t.Fatal(err)
		}
		var out map[string]string
		json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if manual {
			now, perr := time.Parse(time.RFC3339Nano, out["now"])
			if resp.StatusCode != 200 || perr != nil || now.Sub(time.Now()) < 59*time.Minute {
				t.Errorf("--manual-clock: advance 1h: %d %v, want now about an hour ahead", resp.StatusCode, out)
			}
		} else if resp.StatusCode != 409 || !strings.Contains(out["error"], "--manual-clock") {
			t.Errorf("without --manual-clock: %d %v, want 409 naming --manual-clock", resp.StatusCode, out)
		}
		stop()
	}
}

// startEngine runs `archiver engine` with args on a free loopback
// port and returns its address once it accepts connections, and stop,
// which ends it and fails the test if it ended with an error.
func startEngine(t *testing.T, args []string) (addr string, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	args = append([]string{"--listen", addr}, args...)
	go func() { done <- Run(ctx, "archiver engine", args, io.Discard) }()
	stop = func() {
		t.Helper()
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("engine: %v", err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return addr, stop
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("archiver engine %v: not listening after 10s: %v", args, err)
		}
	}
}

// TestRunDataDir starts `archiver engine --data-dir D`: a second
// engine on D is refused with an error naming D, and once the first stops
// a new one starts on D.
func TestRunDataDir(t *testing.T) {
	dir := t.TempDir()
	run := func(ctx context.Context) error {
		args := []string{"--listen", "127.0.0.1:0", "--ttl-interval", "-1s", "--log-level", "error", "--data-dir", dir}
		return Run(ctx, "archiver engine", args, io.Discard)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, serr := os.Stat(filepath.Join(dir, "wal-0000000000000001.log")); serr == nil {
			break
		}
	}
	short, cancelShort := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancelShort()
	if err = run(short); err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "another engine holds") {
		t.Errorf("second engine on %s: %v, want an error naming the directory and the other engine", dir, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("first engine: %v", err)
	}
	ctx2, cancel2 := context.WithCancel(t.Context())
	go func() { done <- run(ctx2) }()
	time.Sleep(200 * time.Millisecond)
	cancel2()
	if err := <-done; err != nil {
		t.Fatalf("engine after the first stopped: %v", err)
	}
}

// TestRunConnectionFlagsInvalid: --allow-host, --max-conns,
// --body-timeout and --idle-timeout refuse bad values with a usage error
// naming the flag.
func TestRunConnectionFlagsInvalid(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--allow-host", "engine", "--allow-host", "engine:8000"}, `--allow-host: allowed host "engine:8000"`},
		{[]string{"--allow-host", "ok,http://x"}, `--allow-host: allowed host "http://x"`},
		{[]string{"--max-conns", "0"}, "--max-conns: 0 must be at least 1"},
		{[]string{"--body-timeout", "0s"}, "--body-timeout: 0s must be positive"},
		{[]string{"--idle-timeout", "-1s"}, "--idle-timeout: -1s must be positive"},
	} {
		err := Run(t.Context(), "archiver engine", c.args, io.Discard)
		var ue *cli.UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("engine %q: %v, want a usage error containing %s", c.args, err, c.want)
		}
	}
}

// TestRunRegionFlag: --region takes what the engine serves (any
// well-formed name, local too), not only AWS's form; anything else is a
// usage error naming the flag.
func TestRunRegionFlag(t *testing.T) {
	for _, bad := range []string{"US-East-1", "us_east_1", "-local", "local-", ""} {
		err := Run(t.Context(), "archiver engine", []string{"--region", bad}, io.Discard)
		var ue *cli.UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), fmt.Sprintf("--region: %q is not a Region name", bad)) {
			t.Errorf("engine --region %q: %v, want a usage error naming the flag", bad, err)
		}
	}
	_, stop := startEngine(t, []string{"--ttl-interval", "-1s", "--log-level", "error", "--region", "local"})
	stop()
}

// TestRunAllowHost starts `archiver engine` on loopback with
// --allow-host given twice: the names it lists and the engine's own
// address are answered, any other Host is refused with 403 naming the
// flag.
func TestRunAllowHost(t *testing.T) {
	addr, stop := startEngine(t, []string{"--ttl-interval", "-1s", "--log-level", "error", "--allow-host", "engine", "--allow-host", "host.docker.internal,other"})
	defer stop()
	_, port, _ := net.SplitHostPort(addr)
	get := func(host string) (int, string, error) {
		req, err := http.NewRequest("GET", "http://"+addr+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	for _, c := range []struct {
		host string
		code int
	}{
		{addr, 200},
		{"localhost:" + port, 200},
		{"engine:" + port, 200},
		{"host.docker.internal:" + port, 200},
		{"other", 200},
		{"evil.example:" + port, 403},
	} {
		code, body, err := get(c.host)
		if err != nil || code != c.code {
			t.Errorf("Host %s: %d %s %v, want %d", c.host, code, body, err, c.code)
		}
		if c.code == 403 && !strings.Contains(body, "--allow-host") {
			t.Errorf("Host %s refused without naming --allow-host: %s", c.host, body)
		}
	}
}

// TestConsoleOn: the console is on by default only on a loopback
// --listen; --ui=true turns it on elsewhere, --ui=false off anywhere.
func TestConsoleOn(t *testing.T) {
	for _, c := range []struct {
		listen string
		args   []string
		want   bool
	}{
		{"127.0.0.1:8000", nil, true},
		{"localhost:8000", nil, true},
		{"[::1]:8000", nil, true},
		{"0.0.0.0:8000", nil, false},
		{":8000", nil, false},
		{"10.1.2.3:8000", []string{"--ui"}, true},
		{"0.0.0.0:8000", []string{"--ui=true"}, true},
		{"127.0.0.1:8000", []string{"--ui=false"}, false},
	} {
		fs := flag.NewFlagSet("engine", flag.ContinueOnError)
		ui := fs.Bool("ui", true, "")
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		if got := consoleOn(fs, *ui, c.listen); got != c.want {
			t.Errorf("--listen %s %v: console %v, want %v", c.listen, c.args, got, c.want)
		}
	}
}

// TestRunUI starts `archiver engine`: the console answers at
// /_engine/ui/, and with --ui=false is 404.
func TestRunUI(t *testing.T) {
	for _, c := range []struct {
		args []string
		want int
	}{{nil, http.StatusOK}, {[]string{"--ui=false"}, http.StatusNotFound}} {
		addr, stop := startEngine(t, append([]string{"--ttl-interval", "-1", "--log-level", "error"}, c.args...))
		resp, err := http.Get("http://" + addr + "/_engine/ui/")
		if err != nil {
			stop()
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("archiver engine %v: GET /_engine/ui/: %d, want %d", c.args, resp.StatusCode, c.want)
		}
		stop()
	}
}

// The hidden --cpuprofile flag is not in --help, and a profile is written
// when the engine stops.
func TestRunCPUProfile(t *testing.T) {
	var out strings.Builder
	if err := Run(t.Context(), "archiver engine", []string{"--help"}, &out); err != cli.ErrHelp {
		t.Fatalf("--help: %v", err)
	}
	if strings.Contains(out.String(), "cpuprofile") {
		t.Fatalf("--help lists the hidden flag:\n%s", out.String())
	}
	file := filepath.Join(t.TempDir(), "cpu.out")
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // the engine starts, finds ctx done and stops
	err := Run(ctx, "archiver engine", []string{"--listen", "127.0.0.1:0", "--cpuprofile", file, "--log-level", "error"}, io.Discard)
	if err != nil {
		t.Fatalf("engine: %v", err)
	}
	if fi, err := os.Stat(file); err != nil || fi.Size() == 0 {
		t.Fatalf("profile not written: %v", err)
	}
}

// TestRunServesTheSDK starts the engine command and drives it with the
// real SDK client: CreateTable (stream and TTL), PutItem, then GetItem
// reads the item back as written.
func TestRunServesTheSDK(t *testing.T) {
	addr, stop := startEngine(t, []string{"--log-level", "error"})
	defer stop()
	db := enginetest.ClientAt("http://"+addr, enginetest.DefaultKey)
	enginetest.CreateTable(t, db, enginetest.Table{Name: "Sessions", TTL: "expires"})
	item := map[string]types.AttributeValue{
		"pk":      &types.AttributeValueMemberS{Value: "user1"},
		"expires": &types.AttributeValueMemberN{Value: "4102444800"},
		"data":    &types.AttributeValueMemberB{Value: []byte{0, 1, 2}},
	}
	if _, err := db.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String("Sessions"), Item: item}); err != nil {
		t.Fatalf("PutItem: %v", err)
	}
	out, err := db.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String("Sessions"), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "user1"}}})
	if err != nil {
		t.Fatalf("GetItem: %v", err)
	}
	pk, _ := out.Item["pk"].(*types.AttributeValueMemberS)
	exp, _ := out.Item["expires"].(*types.AttributeValueMemberN)
	data, _ := out.Item["data"].(*types.AttributeValueMemberB)
	if len(out.Item) != 3 || pk == nil || pk.Value != "user1" || exp == nil || exp.Value != "4102444800" || data == nil || !bytes.Equal(data.Value, []byte{0, 1, 2}) {
		t.Errorf("GetItem = %#v, want the item put", out.Item)
	}
}

// TestRunNamesTheProgram: the program's name (archiver-engine, the slim
// binary) heads the help and every message about its flags.
func TestRunNamesTheProgram(t *testing.T) {
	var out strings.Builder
	if err := Run(t.Context(), "archiver-engine", []string{"-h"}, &out); err != cli.ErrHelp || !strings.HasPrefix(out.String(), "usage: archiver-engine [flags]\n\nflags:\n  -allow-host NAME\n") {
		t.Errorf("-h: %v\n%s", err, out.String())
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--listn", "x"}, "archiver-engine: unknown flag --listn; did you mean --listen? (see archiver-engine -h)"},
		{[]string{"--listen", "x", "--max-conns", "0"}, "archiver-engine: --listen: \"x\" is not HOST:PORT (e.g. 127.0.0.1:8000)\narchiver-engine: --max-conns: 0 must be at least 1"},
		{[]string{"--memory-headroom", "11"}, "archiver-engine: --memory-headroom 11: want 0 (off) to 10"},
		{[]string{"--cpuprofile"}, "archiver-engine: flag needs an argument: --cpuprofile"},
		{[]string{"serve"}, `archiver-engine: unexpected argument "serve"`},
	} {
		err := Run(t.Context(), "archiver-engine", c.args, io.Discard)
		var ue *cli.UsageError
		if !errors.As(err, &ue) || err.Error() != c.want {
			t.Errorf("%q: %v, want the usage error %q", c.args, err, c.want)
		}
	}
}
