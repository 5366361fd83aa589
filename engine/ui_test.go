package engine_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/engine/enginetest"
)

// The console's HTTP side without a browser: its files and headers, its
// guards (those of the control API), its JSON endpoints, and --ui=false.

// wantCSP is the console's Content-Security-Policy.
const wantCSP = "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
	"frame-ancestors 'none'; object-src 'none'; base-uri 'none'; form-action 'none'"

// uiDo sends one request to the engine at endpoint: header "Host" sets
// the Host the request names. It returns the answer and its body.
func uiDo(t *testing.T, endpoint, method, path string, header map[string]string, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, endpoint+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, path, err)
	}
	return resp, string(b)
}

var jsonCT = map[string]string{"Content-Type": "application/json"}

// TestUIFilesAndHeaders: the page and its files come with their types,
// and every answer of the console, errors too, with the
// Content-Security-Policy and the other security headers.
func TestUIFilesAndHeaders(t *testing.T) {
	bed := enginetest.Start(t, engine.Options{UI: true, TTLInterval: -1})
	for _, c := range []struct {
		method, path string
		status       int
		ctype        string
	}{
		{"GET", "/_engine/ui/", 200, "text/html; charset=utf-8"},
		{"HEAD", "/_engine/ui/", 200, "text/html; charset=utf-8"},
		{"GET", "/_engine/ui/app.js", 200, "text/javascript; charset=utf-8"},
		{"GET", "/_engine/ui/app.css", 200, "text/css; charset=utf-8"},
		{"GET", "/_engine/ui/icon.svg", 200, "image/svg+xml"},
		{"GET", "/_engine/ui/api/overview", 200, "application/json"},
		{"GET", "/_engine/ui", 302, ""},
		{"GET", "/_engine/ui/nope.js", 404, "application/json"},
		{"GET", "/_engine/ui/api/nope", 404, "application/json"},
		{"GET", "/_engine/ui/api/call", 405, "application/json"},
		{"POST", "/_engine/ui/app.js", 405, "application/json"},
		{"POST", "/_engine/ui/api/overview", 405, "application/json"},
	} {
		resp, body := uiDo(t, bed.Endpoint, c.method, c.path, jsonCT, "{}")
		h := resp.Header
		if resp.StatusCode != c.status || (c.ctype != "" && h.Get("Content-Type") != c.ctype) {
			t.Errorf("%s %s: %d %q, want %d %q; body %s", c.method, c.path, resp.StatusCode, h.Get("Content-Type"), c.status, c.ctype, body)
		}
		for k, v := range map[string]string{"Content-Security-Policy": wantCSP, "X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY",
			"Referrer-Policy": "no-referrer", "Cross-Origin-Opener-Policy": "same-origin", "Cache-Control": "no-store"} {
			if h.Get(k) != v {
				t.Errorf("%s %s: %s %q, want %q", c.method, c.path, k, h.Get(k), v)
			}
		}
	}
	if resp, _ := uiDo(t, bed.Endpoint, "GET", "/_engine/ui", nil, ""); resp.Header.Get("Location") != "/_engine/ui/" {
		t.Errorf("GET /_engine/ui: Location %q, want /_engine/ui/", resp.Header.Get("Location"))
	}
	if resp, _ := uiDo(t, bed.Endpoint, "GET", "/_engine/ui/api/call", nil, ""); resp.Header.Get("Allow") != "POST" {
		t.Errorf("GET call: Allow %q, want POST", resp.Header.Get("Allow"))
	}
}

// TestUINoInlineCode: the page holds no inline script, style or event
// handler (the CSP would block them), and the script never turns text
// into HTML or code: items reach the page as text only.
func TestUINoInlineCode(t *testing.T) {
	bed := enginetest.Start(t, engine.Options{UI: true, TTLInterval: -1})
	_, page := uiDo(t, bed.Endpoint, "GET", "/_engine/ui/", nil, "")
	_, script := uiDo(t, bed.Endpoint, "GET", "/_engine/ui/app.js", nil, "")
	for _, c := range []struct {
		file, text string
		bad        *regexp.Regexp
	}{
		{"index.html", page, regexp.MustCompile(`(?i)<script(\s[^>]*)?>[^<]|<style|\sstyle=|\son[a-z]+=|javascript:`)},
		{"app.js", script, regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|setAttribute\('on|\.on[a-z]+ =|\.style\b|createContextualFragment|srcdoc`)},
	} {
		if m := c.bad.FindAllString(c.text, -1); len(m) > 0 {
			t.Errorf("%s holds %q", c.file, m)
		}
	}
	for _, tag := range regexp.MustCompile(`(?i)<script\b[^>]*>`).FindAllString(page, -1) {
		if tag != `<script type="module" src="app.js">` {
			t.Errorf("index.html holds %s; the page loads app.js alone", tag)
		}
	}
}

// TestUIOff: with Options.UI false (--ui=false) the console is 404 and
// the control API still answers.
func TestUIOff(t *testing.T) {
	bed := enginetest.Start(t, engine.Options{TTLInterval: -1})
	for _, p := range []string{"/_engine/ui", "/_engine/ui/", "/_engine/ui/app.js", "/_engine/ui/api/overview"} {
		resp, body := uiDo(t, bed.Endpoint, "GET", p, nil, "")
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "--ui=false") {
			t.Errorf("GET %s with the console off: %d %s, want 404 naming --ui=false", p, resp.StatusCode, body)
		}
	}
	if resp, body := uiDo(t, bed.Endpoint, "POST", "/_engine/ui/api/call", jsonCT, `{"op":"Scan"}`); resp.StatusCode != http.StatusNotFound {
		t.Errorf("POST call with the console off: %d %s, want 404", resp.StatusCode, body)
	}
	if resp, body := uiDo(t, bed.Endpoint, "GET", "/_engine/clock", nil, ""); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /_engine/clock with the console off: %d %s", resp.StatusCode, body)
	}
}

// TestUIGuards: the console refuses what the control API refuses (a
// foreign Host, a POST from another site or without JSON) and every
// request of another site's page but a top-level navigation to it.
func TestUIGuards(t *testing.T) {
	bed := enginetest.Start(t, engine.Options{UI: true, TTLInterval: -1})
	self := bed.Endpoint
	port := self[strings.LastIndex(self, ":")+1:]
	nav := func(site, dest string) map[string]string {
		return map[string]string{"Sec-Fetch-Site": site, "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": dest}
	}
	call := `{"op":"Scan","input":{"TableName":"none"}}` // 400 ResourceNotFound once admitted
	for _, c := range []struct {
		name, method, path string
		header             map[string]string
		status             int
	}{
		{"curl reads the overview", "GET", "/_engine/ui/api/overview", nil, 200},
		{"the page's own fetch", "GET", "/_engine/ui/api/overview", map[string]string{"Sec-Fetch-Site": "same-origin"}, 200},
		{"a typed address", "GET", "/_engine/ui/", nav("none", "document"), 200},
		{"a link from another site", "GET", "/_engine/ui/", nav("cross-site", "document"), 200},
		{"rebound Host", "GET", "/_engine/ui/", map[string]string{"Host": "evil.example:" + port}, 403},
		{"rebound Host, POST", "POST", "/_engine/ui/api/call", map[string]string{"Host": "evil.example:" + port, "Content-Type": "application/json"}, 403},
		{"another site's frame", "GET", "/_engine/ui/", nav("cross-site", "iframe"), 403},
		{"another site's fetch", "GET", "/_engine/ui/api/overview", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403},
		{"a sibling site's fetch", "GET", "/_engine/ui/api/stream?table=abc", map[string]string{"Sec-Fetch-Site": "same-site"}, 403},
		{"another site's script tag", "GET", "/_engine/ui/app.js", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Dest": "script"}, 403},
		{"navigating to the API", "GET", "/_engine/ui/api/overview", nav("cross-site", "document"), 403},
		{"another Origin", "GET", "/_engine/ui/api/overview", map[string]string{"Origin": "http://evil.example"}, 403},
		{"the page's own POST", "POST", "/_engine/ui/api/call", map[string]string{"Content-Type": "application/json", "Origin": self, "Sec-Fetch-Site": "same-origin"}, 400},
		{"another site's POST", "POST", "/_engine/ui/api/call", map[string]string{"Content-Type": "application/json", "Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}, 403},
		{"another port's POST", "POST", "/_engine/ui/api/call", map[string]string{"Content-Type": "application/json", "Origin": "http://127.0.0.1:1"}, 403},
		{"a form's POST", "POST", "/_engine/ui/api/call", map[string]string{"Content-Type": "text/plain"}, 415},
	} {
		resp, body := uiDo(t, self, c.method, c.path, c.header, call)
		if resp.StatusCode != c.status {
			t.Errorf("%s: %s %s: %d %s, want %d", c.name, c.method, c.path, resp.StatusCode, body, c.status)
		}
		// Every answer, a refusal too, is the console's: never framed,
		// sniffed or cached.
		if resp.Header.Get("Content-Security-Policy") == "" || resp.Header.Get("X-Frame-Options") != "DENY" || resp.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: answer %d lacks the console's headers: %v", c.name, resp.StatusCode, resp.Header)
		}
	}
}

// TestUIClientAddress: only loopback clients and those of ControlFrom
// reach the console, as the control API.
func TestUIClientAddress(t *testing.T) {
	for _, c := range []struct {
		name string
		from []netip.Prefix
		want int
	}{
		{"not admitted", nil, http.StatusForbidden},
		{"admitted by ControlFrom", []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}, http.StatusOK},
	} {
		e, err := engine.New(engine.Options{UI: true, TTLInterval: -1, ControlFrom: c.from})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		req := httptest.NewRequest("GET", "/_engine/ui/api/overview", nil)
		req.RemoteAddr = "192.0.2.7:4242"
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, rec.Code, rec.Body, c.want)
		}
	}
}

// uiJSON sends a request to the console and decodes its JSON answer.
func uiJSON(t *testing.T, bed *enginetest.Bed, method, path, body string) (int, map[string]any) {
	t.Helper()
	resp, b := uiDo(t, bed.Endpoint, method, path, jsonCT, body)
	var v map[string]any
	if err := json.Unmarshal([]byte(b), &v); err != nil {
		t.Fatalf("%s %s: %d, not a JSON object: %s", method, path, resp.StatusCode, b)
	}
	return resp.StatusCode, v
}

// TestUIOverview: the overview shows the clock, the Regions and each
// table with its item count, TTL attribute, stream and replicas.
func TestUIOverview(t *testing.T) {
	bed := enginetest.Start(t, engine.Options{UI: true, TTLInterval: -1, Clock: engine.NewManualClock(t0)})
	bed.CreateTable(t, enginetest.Table{Name: "Sessions", TTL: "exp", Replicas: []string{"eu-west-1"}})
	bed.CreateTable(t, enginetest.Table{Name: "Plain", NoStream: true})
	uiPut(t, bed, "Sessions", "a", "")
	_, o := uiJSON(t, bed, "GET", "/_engine/ui/api/overview", "")
	if o["now"] != t0.Format(time.RFC3339) || o["manualClock"] != true || o["region"] != "us-east-1" || o["ttlSweep"] != "off" {
		t.Errorf("overview: now %v manualClock %v region %v ttlSweep %v", o["now"], o["manualClock"], o["region"], o["ttlSweep"])
	}
	var got []string
	for _, x := range o["tables"].([]any) {
		tb := x.(map[string]any)
		d := tb["table"].(map[string]any)
		stream := "none"
		if s, ok := d["StreamSpecification"].(map[string]any); ok {
			stream = s["StreamViewType"].(string)
		}
		reps := 0
		if r, ok := d["Replicas"].([]any); ok {
			reps = len(r)
		}
		got = append(got, tb["region"].(string)+"/"+d["TableName"].(string)+" items="+strconv.Itoa(int(d["ItemCount"].(float64)))+
			" ttl="+str(tb["ttlAttribute"])+" stream="+stream+" replicas="+strconv.Itoa(reps))
	}
	want := []string{
		"eu-west-1/Sessions items=1 ttl=exp stream=NEW_AND_OLD_IMAGES replicas=1",
		"us-east-1/Plain items=0 ttl= stream=none replicas=0",
		"us-east-1/Sessions items=1 ttl=exp stream=NEW_AND_OLD_IMAGES replicas=1",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("tables:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// uiPut puts item {pk, exp} with the SDK (no exp when "").
func uiPut(t *testing.T, bed *enginetest.Bed, table, pk, exp string) {
	t.Helper()
	it := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}}
	if exp != "" {
		it["exp"] = &types.AttributeValueMemberN{Value: exp}
	}
	if _, err := bed.DynamoDB.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: it}); err != nil {
		t.Fatalf("PutItem %s %s: %v", table, pk, err)
	}
}

// TestUICall: the call endpoint runs the item operations in the Region
// named, answering as the DynamoDB API does, and nothing else; it goes
// past the test's request hook, which it neither meets nor uses up.
func TestUICall(t *testing.T) {
	bed := enginetest.Start(t, engine.Options{UI: true, TTLInterval: -1})
	bed.CreateTable(t, enginetest.Table{Name: "Sessions", Replicas: []string{"eu-west-1"}})
	hooked := 0
	bed.Engine.SetHook(func(string, *http.Request) error { hooked++; return engine.Throttle() })
	for _, c := range []struct {
		name, body string
		status     int
		want       string // in the answer
	}{
		{"put in eu-west-1", `{"region":"eu-west-1","op":"PutItem","input":{"TableName":"Sessions","Item":{"pk":{"S":"from the console"}}}}`, 200, `{}`},
		{"get it back", `{"region":"eu-west-1","op":"GetItem","input":{"TableName":"Sessions","Key":{"pk":{"S":"from the console"}}}}`, 200, `"from the console"`},
		{"scan, default Region", `{"op":"Scan","input":{"TableName":"Sessions"}}`, 200, `"Count":`},
		{"a table of no Region", `{"region":"ap-south-1","op":"Scan","input":{"TableName":"Sessions"}}`, 400, `ResourceNotFoundException`},
		{"the model's check", `{"op":"Query","input":{"TableName":"Sessions"}}`, 400, `ValidationException`},
		{"not an item operation", `{"op":"DeleteTable","input":{"TableName":"Sessions"}}`, 400, `\"op\": \"DeleteTable\" is not one the console runs`},
		{"no op", `{"input":{}}`, 400, `is not one the console runs`},
		{"a bad Region", `{"region":"EU","op":"Scan","input":{"TableName":"Sessions"}}`, 400, `region=\"EU\" is not a Region name`},
		{"an unknown field", `{"op":"Scan","regoin":"x"}`, 400, `unknown field \"regoin\"`},
		{"not JSON", `[`, 400, `not a JSON object`},
	} {
		resp, body := uiDo(t, bed.Endpoint, "POST", "/_engine/ui/api/call", jsonCT, c.body)
		if resp.StatusCode != c.status || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s, want %d with %s", c.name, resp.StatusCode, body, c.status, c.want)
		}
	}
	if hooked != 0 {
		t.Errorf("the console's calls met the request hook %d times", hooked)
	}
	bed.Engine.SetHook(nil)
	out, err := bed.In("eu-west-1").DynamoDB.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String("Sessions"),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "from the console"}}})
	if err != nil || out.Item == nil {
		t.Errorf("GetItem in eu-west-1 after the console's put: %v %v", out, err)
	}
}

// TestUIStream: the stream endpoint shows a table's shards with their
// lineage and records, a TTL delete with its service userIdentity, and
// takes no GetRecords throttle a test set.
func TestUIStream(t *testing.T) {
	clock := engine.NewManualClock(t0)
	bed := enginetest.Start(t, engine.Options{UI: true, TTLInterval: -1, Clock: clock})
	bed.CreateTable(t, enginetest.Table{Name: "Sessions", TTL: "exp"})
	bed.CreateTable(t, enginetest.Table{Name: "Plain", NoStream: true})
	uiPut(t, bed, "Sessions", "a", strconv.FormatInt(t0.Unix()+10, 10))
	clock.Advance(time.Minute)
	if n, err := bed.Engine.SweepTTL(t.Context()); n != 1 || err != nil {
		t.Fatalf("SweepTTL: %d, %v", n, err)
	}
	if err := bed.Engine.ForceRollover("Sessions"); err != nil {
		t.Fatal(err)
	}
	bed.Engine.ThrottleGetRecords(1)
	status, v := uiJSON(t, bed, "GET", "/_engine/ui/api/stream?table=Sessions", "")
	if status != 200 {
		t.Fatalf("stream: %d %v", status, v)
	}
	var st struct {
		Enabled bool
		Stream  struct {
			Shards []struct {
				ShardID       string `json:"shardId"`
				ParentShardID string `json:"parentShardId"`
				End           string `json:"endingSequenceNumber"`
				Records       []struct {
					EventName    string         `json:"eventName"`
					UserIdentity map[string]any `json:"userIdentity"`
				} `json:"records"`
			} `json:"shards"`
		} `json:"stream"`
	}
	b, _ := json.Marshal(v)
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	sh := st.Stream.Shards
	if !st.Enabled || len(sh) != 2 || sh[0].End == "" || sh[1].ParentShardID != sh[0].ShardID || sh[1].End != "" {
		t.Fatalf("shards: %s, want a closed one and its open child", b)
	}
	recs := sh[0].Records
	if len(recs) != 2 || recs[0].EventName != "INSERT" || recs[0].UserIdentity != nil ||
		recs[1].EventName != "REMOVE" || recs[1].UserIdentity["Type"] != "Service" || recs[1].UserIdentity["PrincipalId"] != "dynamodb.amazonaws.com" {
		t.Errorf("records: %s, want an INSERT and a service REMOVE", b)
	}
	if _, s := uiJSON(t, bed, "GET", "/_engine/state", ""); s["throttle"].(map[string]any)["GetRecords"] != float64(1) {
		t.Errorf("the stream view used up the GetRecords throttle: state %v", s)
	}
	for _, c := range []struct {
		query  string
		status int
		want   string
	}{
		{"table=Plain", 404, `has no stream`},
		{"table=Nope", 404, `no table \"Nope\" in us-east-1`},
		{"table=Sessions&region=eu-west-1", 404, `no table \"Sessions\" in eu-west-1`},
		{"table=a", 400, `table: `},
		{"", 400, `table: `},
		{"table=Sessions&region=Bad_Region", 400, `is not a Region name`},
	} {
		resp, body := uiDo(t, bed.Endpoint, "GET", "/_engine/ui/api/stream?"+c.query, nil, "")
		if resp.StatusCode != c.status || !strings.Contains(body, c.want) {
			t.Errorf("stream?%s: %d %s, want %d with %s", c.query, resp.StatusCode, body, c.status, c.want)
		}
	}
}
