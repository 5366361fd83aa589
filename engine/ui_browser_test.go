package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/chromedp/chromedp"

	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/engine/enginetest"
)

// The console in a real headless Chromium (Debian's chromium package;
// .ci/tools.sh installs it): the tests click through the page as a user
// would. Where no Chromium is found or none starts, they skip, saying why.

// browserWait bounds each wait for the page to show something: a bound
// for a slow machine, not a timing the test asserts.
const browserWait = 90 * time.Second

// chromiumPath is the Chromium to drive: $CHROMIUM, or the first of the
// usual names on $PATH; "" when there is none.
func chromiumPath() string {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browser is a headless Chromium tab for one test, and the page's console
// errors and uncaught exceptions, which fail the test at its end.
type browser struct {
	t   *testing.T
	ctx context.Context

	mu     sync.Mutex
	errors []string
}

// startBrowser starts a headless Chromium, or skips t when none starts.
func startBrowser(t *testing.T) *browser {
	t.Helper()
	path := chromiumPath()
	if path == "" {
		t.Skip("browser test skipped: no Chromium found (apt-get install chromium, or set CHROMIUM to its path; .ci/tools.sh installs it)")
	}
	// No sandbox: CI runs as root in a container, where Chromium's
	// sandbox cannot start; the browser opens only the test's own engine.
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Skipf("browser test skipped: Chromium %s did not start: %v", path, err)
	}
	b := &browser{t: t, ctx: ctx}
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.IsException() || m.Type == chromedp.ConsoleError {
				b.mu.Lock()
				b.errors = append(b.errors, m.String()+" at "+m.URL)
				b.mu.Unlock()
			}
		}
	}()
	t.Cleanup(b.checkConsole)
	return b
}

// checkConsole fails the test on any error the page logged: a script
// error, a request refused, a Content-Security-Policy violation.
func (b *browser) checkConsole() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.errors {
		b.t.Errorf("browser console: %s", e)
	}
}

// do runs actions in the tab, failing the test with what on an error.
func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, browserWait)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// waitFor waits until the JavaScript expression cond is true; if it never
// is, the test fails with what and the value of show.
func (b *browser) waitFor(what, cond, show string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, browserWait)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](cond, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(browserWait)))
	if err != nil {
		b.t.Fatalf("waiting for %s: %v; the page shows %q", what, err, eval[string](b, show))
	}
}

// open clicks the sidebar's link to a table, then one of its tabs, and
// waits until the page shows them.
func (b *browser) open(region, table, tab string) {
	b.t.Helper()
	b.do("opening "+region+"/"+table, chromedp.Click(chromedp.CSS(fmt.Sprintf(`a.table-link[data-region=%q][data-table=%q]`, region, table))))
	b.waitFor("the page of "+region+"/"+table, fmt.Sprintf(`location.hash === %q && document.getElementById('table-title')?.textContent === %q`,
		"#/"+region+"/"+table+"/items", table+" in "+region), `location.hash`)
	if tab != "items" {
		b.do("opening the "+tab+" tab", chromedp.Click(chromedp.ID("tab-"+tab)))
		b.waitFor("the "+tab+" tab", `document.getElementById('tab-`+tab+`')?.classList.contains('current')`, `location.hash`)
	}
}

// jsRow is a JavaScript expression for the item row of the open list
// whose first key cell reads text (undefined when none does).
func jsRow(list, text string) string {
	q, _ := json.Marshal(text)
	return fmt.Sprintf(`[...document.querySelectorAll('#%s tr.item-row')].find(r => r.querySelector('td.key').textContent === %s)`, list, q)
}

// jsRecord is a JavaScript expression for the stream record of the shown
// stream with this event name and key text, of the TTL sweeper's or not.
func jsRecord(event, keys string, service bool) string {
	q, _ := json.Marshal(keys)
	not := "!"
	if service {
		not = ""
	}
	return fmt.Sprintf(`[...document.querySelectorAll('#stream li.record[data-event=%q]')].find(r => r.querySelector('.keys').textContent === %s && %sr.classList.contains('service-delete'))`, event, q, not)
}

const jsItemsText = `(document.getElementById('items') || document.body).innerText`
const jsStreamText = `(document.getElementById('stream') || document.body).innerText`

// TestUIBrowserExpiry is the console's end-to-end test: a table with TTL,
// a stream and a replica, made with the SDK; the page shows it, counts an
// item's TTL down as the clock control advances the engine clock, shows
// the item gone once expired and its REMOVE in the stream marked as the
// TTL sweeper's (a plain REMOVE in the replica's), renders a hostile
// item as text, and edits and queries items.
func TestUIBrowserExpiry(t *testing.T) {
	b := startBrowser(t)
	bed := enginetest.Start(t, engine.Options{UI: true, Clock: engine.NewManualClock(t0), TTLInterval: 20 * time.Millisecond})
	bed.CreateTable(t, enginetest.Table{Name: "Sessions", TTL: "exp", Replicas: []string{"eu-west-1"}})
	hostile := `<img src=x onerror="window.__pwned=1">`
	for _, it := range []map[string]types.AttributeValue{
		{"pk": &types.AttributeValueMemberS{Value: "alice"}, "exp": &types.AttributeValueMemberN{Value: strconv.FormatInt(t0.Unix()+60, 10)}},
		{"pk": &types.AttributeValueMemberS{Value: "bob"}, "note": &types.AttributeValueMemberS{Value: "plain"}},
		{"pk": &types.AttributeValueMemberS{Value: hostile}, "note": &types.AttributeValueMemberS{Value: `<script>window.__pwned=2</script>`}},
	} {
		if _, err := bed.DynamoDB.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String("Sessions"), Item: it}); err != nil {
			t.Fatalf("PutItem: %v", err)
		}
	}

	b.do("opening the console", chromedp.Navigate(bed.Endpoint+"/_engine/ui/"),
		chromedp.WaitVisible(chromedp.CSS(`a.table-link[data-region="eu-west-1"][data-table="Sessions"]`)))
	b.open("us-east-1", "Sessions", "items")
	alice := jsRow("items", "alice")
	b.waitFor("alice's TTL countdown", alice+`?.querySelector('td.ttl').textContent === 'expires in 1m0s'`, jsItemsText)
	b.waitFor("the hostile item, as text", jsRow("items", hostile)+` !== undefined`, jsItemsText)
	if pwned := eval[bool](b, `window.__pwned !== undefined || document.querySelector('#main img, #main script') !== null`); pwned {
		t.Fatal("an item's value was rendered as HTML")
	}

	b.do("advancing the clock 30s", chromedp.SetValue(chromedp.ID("clock-advance"), "30s"), chromedp.Click(chromedp.ID("clock-advance-btn")))
	b.waitFor("the countdown to follow the clock", alice+`?.querySelector('td.ttl').textContent === 'expires in 30s'`, jsItemsText)
	if now := eval[string](b, `document.getElementById('clock-now').textContent`); now != t0.Add(30*time.Second).Format(time.RFC3339) {
		t.Errorf("the clock shows %q, want %s", now, t0.Add(30*time.Second).Format(time.RFC3339))
	}
	b.do("advancing the clock past the expiry", chromedp.SetValue(chromedp.ID("clock-advance"), "1m"), chromedp.Click(chromedp.ID("clock-advance-btn")))
	b.waitFor("alice to expire and go", alice+` === undefined && `+jsRow("items", "bob")+` !== undefined`, jsItemsText)

	b.open("us-east-1", "Sessions", "stream")
	b.waitFor("alice's REMOVE, a service delete", jsRecord("REMOVE", "pk: alice", true)+` !== undefined`, jsStreamText)
	b.waitFor("alice's INSERT, not one", jsRecord("INSERT", "pk: alice", false)+` !== undefined`, jsStreamText)
	b.open("eu-west-1", "Sessions", "stream")
	b.waitFor("the replica's REMOVE, a replicated one", jsRecord("REMOVE", "pk: alice", false)+` !== undefined`, jsStreamText)

	browserEdit(t, b, bed)
	browserQuery(b, bed)

}

// browserEdit edits bob in the console's editor and reads the change back
// with the SDK.
func browserEdit(t *testing.T, b *browser, bed *enginetest.Bed) {
	b.open("us-east-1", "Sessions", "items")
	b.waitFor("bob's row", jsRow("items", "bob")+` !== undefined`, jsItemsText)
	if _, err := chromedp.Run(b.ctx, chromedp.Evaluate[any](jsRow("items", "bob")+`.querySelector('button.edit-item').click()`)); err != nil {
		t.Fatalf("clicking bob's edit button: %v", err)
	}
	b.do("saving bob", chromedp.WaitVisible(chromedp.ID("editor-json")),
		chromedp.SetValue(chromedp.ID("editor-json"), `{"pk": {"S": "bob"}, "note": {"S": "edited in the console"}}`),
		chromedp.Click(chromedp.ID("editor-save")))
	b.waitFor("the editor to say saved", `document.getElementById('editor-status').textContent === 'saved'`, `document.getElementById('editor-status').textContent`)
	out, err := bed.DynamoDB.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String("Sessions"),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "bob"}}})
	if err != nil {
		t.Fatalf("GetItem bob: %v", err)
	}
	if n, ok := out.Item["note"].(*types.AttributeValueMemberS); !ok || n.Value != "edited in the console" {
		t.Errorf("bob after the edit: %#v, want note %q", out.Item, "edited in the console")
	}
	b.waitFor("the edit in the list", jsRow("items", "bob")+`?.querySelector('td.attrs').textContent === 'note: edited in the console'`, jsItemsText)
}

// browserQuery queries one partition key in the console, reached first
// by a link straight to the tab.
func browserQuery(b *browser, bed *enginetest.Bed) {
	b.do("a link to the query tab", chromedp.Navigate("about:blank"), chromedp.Navigate(bed.Endpoint+"/_engine/ui/#/us-east-1/Sessions/query"))
	b.waitFor("the query form, for the table's key", `document.getElementById('q-pk-name')?.textContent === 'pk ='`, `document.body.innerText`)
	b.do("querying bob",
		chromedp.SetValue(chromedp.ID("q-pk"), "bob"), chromedp.Click(chromedp.ID("q-run")))
	b.waitFor("bob alone in the results", jsRow("query-results", "bob")+` !== undefined && document.querySelectorAll('#query-results tr.item-row').length === 1`,
		`(document.getElementById('query-results') || document.body).innerText`)
}
