package engine_test

import (
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ttl-archiver/archiver/engine"
)

// TestSetHook: SetHook replaces the hook of Options.Hooks while the engine
// serves, and nil removes it.
func TestSetHook(t *testing.T) {
	throttle := func(op string, r *http.Request) error { return engine.Throttle() }
	denied := func(op string, r *http.Request) error {
		return engine.NewError("AccessDeniedException", "not authorized to perform dynamodb:"+op, 400)
	}
	e := newEnv(t, engine.Options{Hooks: engine.Hooks{OnRequest: throttle}})
	for _, c := range []struct {
		name string
		set  bool // call SetHook(hook) before the request
		hook func(op string, r *http.Request) error
		want string // error code; "" for success
	}{
		{name: "the hook of Options", want: "ProvisionedThroughputExceededException"},
		{name: "replaced", set: true, hook: denied, want: "AccessDeniedException"},
		{name: "removed", set: true, hook: nil, want: ""},
		{name: "set again", set: true, hook: throttle, want: "ProvisionedThroughputExceededException"},
	} {
		if c.set {
			e.eng.SetHook(c.hook)
		}
		_, err := e.db.ListTables(e.ctx, &dynamodb.ListTablesInput{})
		if got := errCode(err); got != c.want {
			t.Errorf("%s: ListTables error %v, want code %q", c.name, err, c.want)
		}
	}
}
