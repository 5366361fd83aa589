package engine_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"

	"github.com/ttl-archiver/archiver/engine"
)

// dbAs returns an SDK client that sends requests to srv while naming
// host (with srv's port) in the URL and so in the Host header: what a
// browser sends after DNS rebinding host to the engine's address.
func dbAs(srv *engine.Server, host string) *dynamodb.Client {
	addr := strings.TrimPrefix(srv.Endpoint(), "http://")
	_, port, _ := net.SplitHostPort(addr)
	hc := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}
	})
	return dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		BaseEndpoint: aws.String("http://" + net.JoinHostPort(host, port)),
		HTTPClient:   hc,
	})
}

// TestHostCheckSDK: on an engine listening on 127.0.0.1, the real SDK
// works under the engine's address and localhost, and a client naming
// another host (DNS rebinding) is refused with 403 AccessDeniedException
// naming the host and --allow-host, unless AllowHosts admits the name.
func TestHostCheckSDK(t *testing.T) {
	plain := newEnv(t, engine.Options{})
	allowing := newEnv(t, engine.Options{AllowHosts: []string{"engine", "Host.Docker.Internal"}})
	for _, c := range []struct {
		name string
		srv  *engine.Server
		host string
		ok   bool
	}{
		{"engine's address", plain.srv, "127.0.0.1", true},
		{"localhost", plain.srv, "localhost", true},
		{"other 127/8", plain.srv, "127.0.0.2", true},
		{"ipv6 loopback", plain.srv, "::1", true},
		{"rebound name", plain.srv, "evil.example", false},
		{"localhost as a subdomain", plain.srv, "localhost.evil.example", false},
		{"loopback-looking name", plain.srv, "127.0.0.1.evil.example", false},
		{"another address", plain.srv, "192.0.2.7", false},
		{"allowed name", allowing.srv, "engine", true},
		{"allowed name, other case", allowing.srv, "host.docker.internal", true},
		{"loopback still answered", allowing.srv, "localhost", true},
		{"name not allowed", allowing.srv, "evil.example", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := dbAs(c.srv, c.host).ListTables(context.Background(), &dynamodb.ListTablesInput{})
			if c.ok {
				if err != nil {
					t.Fatalf("Host %s: %v", c.host, err)
				}
				return
			}
			var ae smithy.APIError
			var re *awshttp.ResponseError
			if !errors.As(err, &ae) || ae.ErrorCode() != "AccessDeniedException" || !errors.As(err, &re) || re.HTTPStatusCode() != 403 {
				t.Fatalf("Host %s: %v, want 403 AccessDeniedException", c.host, err)
			}
			if msg := ae.ErrorMessage(); !strings.Contains(msg, c.host) || !strings.Contains(msg, "--allow-host") {
				t.Fatalf("Host %s refused with %q: want the host and --allow-host named", c.host, msg)
			}
		})
	}
}

// ctlRaw sends one request to srv with the given Host and headers and
// returns the status and body.
func ctlRaw(t *testing.T, srv *engine.Server, method, path, host, body string, hdr map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.Endpoint()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestControlRefusesBrowserRequests: a web page's cross-site POST (the
// simple kind a browser sends without asking: text/plain, a form, or no
// body) and a request naming a foreign Host never reach a control
// handler: 4xx naming the reason, and the TTL sweep they asked for has
// not run. Local clients (curl, SDKs: no Origin, no Sec-Fetch-Site) and
// the engine's own origin get through.
func TestControlRefusesBrowserRequests(t *testing.T) {
	e := newEnv(t, engine.Options{})
	e.createTable("ttl1", "", nil)
	e.enableTTL("ttl1", "exp")
	e.put("ttl1", item{"pk": S("a"), "exp": N(strconv.FormatInt(t0.Add(-time.Minute).Unix(), 10))})
	self := strings.TrimPrefix(e.srv.Endpoint(), "http://")
	_, port, _ := net.SplitHostPort(self)
	const json = "application/json"
	for _, c := range []struct {
		name string
		host string
		hdr  map[string]string
		code int
		want string
	}{
		{"cross-site text/plain", "", map[string]string{"Content-Type": "text/plain", "Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}, 403, "Sec-Fetch-Site"},
		{"cross-site JSON", "", map[string]string{"Content-Type": json, "Sec-Fetch-Site": "cross-site"}, 403, "Sec-Fetch-Site"},
		{"same-site page on another port", "", map[string]string{"Content-Type": json, "Sec-Fetch-Site": "same-site"}, 403, "Sec-Fetch-Site"},
		{"foreign Origin only", "", map[string]string{"Content-Type": json, "Origin": "http://localhost:3000"}, 403, "Origin"},
		{"null Origin", "", map[string]string{"Content-Type": json, "Origin": "null"}, 403, "Origin"},
		{"text/plain, no Origin", "", map[string]string{"Content-Type": "text/plain"}, 415, "application/json"},
		{"form", "", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415, "application/json"},
		{"multipart form", "", map[string]string{"Content-Type": "multipart/form-data; boundary=x"}, 415, "application/json"},
		{"no Content-Type", "", nil, 415, "Content-Type"},
		{"rebound Host", "evil.example:" + port, map[string]string{"Content-Type": json}, 403, "--allow-host"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body := ctlRaw(t, e.srv, "POST", "/_engine/ttl/sweep", c.host, "", c.hdr)
			if code != c.code || !strings.Contains(body, c.want) || !strings.HasPrefix(body, `{"error":`) {
				t.Fatalf("%d %s, want %d with an error naming %s", code, body, c.code, c.want)
			}
		})
	}
	if e.get("ttl1", item{"pk": S("a")}) == nil {
		t.Fatal("a refused sweep request deleted the expired item")
	}
	for _, c := range []struct {
		name string
		host string
		hdr  map[string]string
	}{
		{"curl", "", map[string]string{"Content-Type": json}},
		{"its own origin", "", map[string]string{"Content-Type": "application/json; charset=utf-8", "Origin": "http://" + self, "Sec-Fetch-Site": "same-origin"}},
		{"localhost", "localhost:" + port, map[string]string{"Content-Type": json}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if code, body := ctlRaw(t, e.srv, "POST", "/_engine/ttl/sweep", c.host, "{}", c.hdr); code != 200 {
				t.Fatalf("%d %s, want 200", code, body)
			}
		})
	}
	if e.get("ttl1", item{"pk": S("a")}) != nil {
		t.Fatal("the local sweep left the expired item")
	}
	// Reading the clock changes nothing and needs no Content-Type.
	if code, body := ctlRaw(t, e.srv, "GET", "/_engine/clock", "", "", nil); code != 200 {
		t.Fatalf("GET clock: %d %s", code, body)
	}
}

func TestParseAllowHosts(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
		err  string
	}{
		{"", nil, ""},
		{"engine", []string{"engine"}, ""},
		{" engine , host.docker.internal,,my_svc ", []string{"engine", "host.docker.internal", "my_svc"}, ""},
		{"*", []string{"*"}, ""},
		{"10.0.0.5,[fd00::1]", []string{"10.0.0.5", "[fd00::1]"}, ""},
		{"engine:8000", nil, `"engine:8000"`},
		{"http://engine", nil, "no port, scheme or path"},
		{"engine/x", nil, `"engine/x"`},
		{"a b", nil, `"a b"`},
	} {
		got, err := engine.ParseAllowHosts(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: %v %v, want an error naming %s", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("%q: %q %v, want %q", c.in, got, err, c.want)
		}
	}
	if _, err := engine.New(engine.Options{AllowHosts: []string{"x:1"}}); err == nil || !strings.Contains(err.Error(), "AllowHosts") {
		t.Errorf("New with AllowHosts x:1: %v, want an error naming AllowHosts", err)
	}
}
