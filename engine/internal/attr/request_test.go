package attr

import (
	"encoding/json"
	"reflect"
	"testing"
)

// fastRequest is a request the way the engine's fast paths read one.
type fastRequest struct {
	TableName string
	Item      Item
	Key       Item
	Consist   bool `json:"ConsistentRead"`
}

// readFast reads body with a RequestReader as the engine does: known
// members, each at most once; anything else refused.
func readFast(body []byte) (fastRequest, bool) {
	var req fastRequest
	r := NewRequestReader(body)
	seen := map[string]bool{}
	for name, ok := r.Next(); ok; name, ok = r.Next() {
		if seen[string(name)] {
			r.Fail()
		}
		seen[string(name)] = true
		switch string(name) {
		case "TableName":
			req.TableName = r.String()
		case "Item":
			req.Item = r.Item()
		case "Key":
			if kv := r.Attrs(make([]Attr, 0, 2)); kv != nil {
				req.Key = Item{}
				for _, a := range kv {
					req.Key[a.Name] = a.Value // the last of duplicates wins, as in a map
				}
			}
		case "ConsistentRead":
			req.Consist = r.Bool()
		default:
			r.Fail()
		}
	}
	return req, r.OK()
}

// jsonItem decodes Item the way the engine's slow path does: encoding/json
// hands the raw member to UnmarshalItemJSON.
type jsonItem Item

func (j *jsonItem) UnmarshalJSON(b []byte) error {
	it, err := UnmarshalItemJSON(b)
	*j = jsonItem(it)
	return err
}

// readSlow is the slow path: encoding/json into the same fields.
func readSlow(body []byte) (fastRequest, error) {
	var req struct {
		TableName      string
		Item           jsonItem
		Key            jsonItem
		ConsistentRead bool
	}
	err := json.Unmarshal(body, &req)
	return fastRequest{req.TableName, Item(req.Item), Item(req.Key), req.ConsistentRead}, err
}

// checkAgrees fails when the fast reader accepts a body that encoding/json
// refuses or decodes differently.
func checkAgrees(t *testing.T, body string) (accepted bool) {
	t.Helper()
	fast, ok := readFast([]byte(body))
	if !ok {
		return false
	}
	slow, err := readSlow([]byte(body))
	if err != nil {
		t.Fatalf("fast path accepted %q, encoding/json refuses it: %v", body, err)
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("%q: fast path read %#v, encoding/json %#v", body, fast, slow)
	}
	return true
}

func TestRequestReader(t *testing.T) {
	for _, tc := range []struct {
		body   string
		accept bool
	}{
		{`{"TableName":"t","Item":{"pk":{"S":"a"},"n":{"N":"01.50"}}}`, true},
		{" \n{ \"Item\" : {\"pk\":{\"S\":\"a\\u00e9\"}} , \"TableName\":\"t\" } \t", true},
		{`{"TableName":"t","ConsistentRead":true}`, true},
		{`{"TableName":"t","Key":{"pk":{"S":"a"},"sk":{"N":"1"},"pk":{"S":"b"}}}`, true}, // duplicate attributes: the last wins
		{`{"Key":{}}`, true},
		{`{"Key":null}`, false},
		{`{"Key":{"pk":{"S":"a"},}}`, false},
		{`{"Key":{"pk":{"S":"a"}`, false},
		{`{}`, true},
		{`{"Item":{"pk":{"S":"a","x":[1,-0.5e+3,{"y":null}]}}}`, true}, // unknown members inside a value are skipped
		{`{"TableName":"t"} x`, false},                                 // trailing garbage
		{`{"TableName":"t",}`, false},
		{`{,"TableName":"t"}`, false},
		{`{"TableName":"t"`, false},
		{`{"TableName":"t\u0041"}`, false},           // escapes: slow path
		{`{"TableName":"tÄ"}`, false},                // not ASCII: slow path
		{`{"tablename":"t"}`, false},                 // encoding/json matches names case-insensitively
		{`{"TableName":"t","TableName":"u"}`, false}, // duplicates
		{`{"TableName":null}`, false},                // null
		{`{"TableName":1}`, false},                   // wrong type: slow path names the error
		{`{"Item":null}`, false},                     //
		{`{"Item":{"pk":{"S":"a","x":01}}}`, false},  // leading zero: not JSON
		{`{"Item":{"pk":{"S":"a","x":1.}}}`, false},  // bare dot: not JSON
		{`{"Item":{"pk":{"S":"a","x":.5}}}`, false},  //
		{`{"Item":{"pk":{"S":"a","x":1e}}}`, false},  //
		{`{"Item":{"pk":{"S":"a","x":-}}}`, false},   //
		{`{"Item":{"pk":{}}}`, false},                // invalid attribute value: slow path reports it
		{`{"Item":{"pk":{"N":"x"}}}`, false},         //
		{`{"ConsistentRead":"true"}`, false},         //
		{`{"Other":1}`, false},                       // refused by the caller
		{`[]`, false},                                //
		{``, false},                                  //
	} {
		if got := checkAgrees(t, tc.body); got != tc.accept {
			t.Errorf("%q: accepted = %v, want %v", tc.body, got, tc.accept)
		}
	}
}

// FuzzRequestReader checks that every body the fast reader accepts is one
// encoding/json decodes to the same request.
func FuzzRequestReader(f *testing.F) {
	for _, s := range []string{
		`{"TableName":"t","Item":{"pk":{"S":"a"},"l":{"L":[{"N":"1"},{"M":{"x":{"BOOL":true}}}]}}}`,
		`{"Item":{"pk":{"S":"a","x":[1,-0.5e+3,{"y":null},"s\n"]}},"ConsistentRead":false}`,
		`{"TableName":"t","Item":{"s":{"SS":["a","b"]},"b":{"B":"AAE="},"z":{"NULL":true}}}`,
		`{"TableName":"t","Key":{"pk":{"S":"a"},"sk":{"N":"-1.5e3"}},"ConsistentRead":true}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) { checkAgrees(t, body) })
}
