package natssink

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// schemaDir holds the message contract's JSON Schemas.
var schemaDir = filepath.Join("..", "..", "docs", "schemas")

// jsonSchemas checks JSON documents against the JSON Schema files of one
// directory, for the subset of JSON Schema (2020-12) that docs/schemas
// uses: type, enum, const, properties, required, additionalProperties,
// minProperties, maxProperties, items, pattern and $ref (a JSON pointer
// into the same file, or a sibling file with an optional pointer), besides
// the annotations. A schema with any other keyword is an error, so the
// schemas cannot use what this checker would silently ignore.
type jsonSchemas struct {
	dir   string
	files map[string]any
}

func newJSONSchemas(dir string) *jsonSchemas {
	return &jsonSchemas{dir: dir, files: map[string]any{}}
}

// decodeJSON decodes data with numbers kept as json.Number.
func decodeJSON(data []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, fmt.Errorf("more than one JSON value")
	}
	return v, nil
}

func (s *jsonSchemas) file(name string) (any, error) {
	if doc, ok := s.files[name]; ok {
		return doc, nil
	}
	data, err := os.ReadFile(filepath.Join(s.dir, name))
	if err != nil {
		return nil, err
	}
	doc, err := decodeJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	s.files[name] = doc
	return doc, nil
}

// Validate checks the JSON document data against schema file name.
func (s *jsonSchemas) Validate(name string, data []byte) error {
	v, err := decodeJSON(data)
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	root, err := s.file(name)
	if err != nil {
		return err
	}
	return s.check(name, root, v, "$")
}

// resolve follows ref from file: "#/a/b", "other.json" or
// "other.json#/a/b".
func (s *jsonSchemas) resolve(file, ref string) (string, any, error) {
	target, pointer, _ := strings.Cut(ref, "#")
	if target != "" {
		file = target
	}
	node, err := s.file(file)
	if err != nil {
		return "", nil, err
	}
	for _, tok := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		if tok == "" {
			continue
		}
		m, ok := node.(map[string]any)
		if !ok || m[tok] == nil {
			return "", nil, fmt.Errorf("$ref %q: %q not found in %s", ref, tok, file)
		}
		node = m[tok]
	}
	return file, node, nil
}

// schemaAnnotations are keywords that never fail a document.
var schemaAnnotations = map[string]bool{"$schema": true, "$id": true, "$defs": true, "$comment": true, "title": true, "description": true, "examples": true}

func (s *jsonSchemas) check(file string, schema, v any, path string) error {
	switch sc := schema.(type) {
	case bool:
		if !sc {
			return fmt.Errorf("%s: the schema allows nothing here", path)
		}
		return nil
	case map[string]any:
		keys := make([]string, 0, len(sc))
		for k := range sc {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if err := s.keyword(file, sc, k, v, path); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("%s: schema in %s is neither an object nor a boolean", path, file)
}

// keyword checks v against one keyword k of schema sc.
func (s *jsonSchemas) keyword(file string, sc map[string]any, k string, v any, path string) error {
	arg := sc[k]
	obj, isObj := v.(map[string]any)
	switch k {
	case "$ref":
		f, node, err := s.resolve(file, arg.(string))
		if err != nil {
			return err
		}
		return s.check(f, node, v, path)
	case "type":
		return checkType(arg, v, path)
	case "enum":
		for _, e := range arg.([]any) {
			if reflect.DeepEqual(e, v) {
				return nil
			}
		}
		return fmt.Errorf("%s: %v is not one of %v", path, v, arg)
	case "const":
		if !reflect.DeepEqual(arg, v) {
			return fmt.Errorf("%s: %v is not %v", path, v, arg)
		}
	case "pattern":
		if str, ok := v.(string); ok && !regexp.MustCompile(arg.(string)).MatchString(str) {
			return fmt.Errorf("%s: %q does not match %s", path, str, arg)
		}
	case "required":
		for _, r := range arg.([]any) {
			if _, ok := obj[r.(string)]; isObj && !ok {
				return fmt.Errorf("%s: %q is required", path, r)
			}
		}
	case "minProperties", "maxProperties":
		n, _ := arg.(json.Number).Int64()
		if isObj && ((k == "minProperties" && int64(len(obj)) < n) || (k == "maxProperties" && int64(len(obj)) > n)) {
			return fmt.Errorf("%s: %d members, %s is %d", path, len(obj), k, n)
		}
	case "properties", "additionalProperties":
		if isObj {
			return s.members(file, sc, k, obj, path)
		}
	case "items":
		arr, _ := v.([]any)
		for i, e := range arr {
			if err := s.check(file, arg, e, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	default:
		if !schemaAnnotations[k] {
			return fmt.Errorf("%s: schema in %s uses keyword %q, which this checker does not know", path, file, k)
		}
	}
	return nil
}

// members checks an object's members against properties (k) or
// additionalProperties (the members properties does not name).
func (s *jsonSchemas) members(file string, sc map[string]any, k string, obj map[string]any, path string) error {
	props, _ := sc["properties"].(map[string]any)
	for name, mv := range obj {
		sub, named := props[name]
		switch {
		case k == "properties" && named:
		case k == "additionalProperties" && !named:
			sub = sc[k]
		default:
			continue
		}
		if err := s.check(file, sub, mv, path+"."+name); err != nil {
			return err
		}
	}
	return nil
}

// checkType checks v against "type", a name or a list of names.
func checkType(arg, v any, path string) error {
	names, ok := arg.([]any)
	if !ok {
		names = []any{arg}
	}
	for _, n := range names {
		if isJSONType(n.(string), v) {
			return nil
		}
	}
	return fmt.Errorf("%s: %T is not of type %v", path, v, arg)
}

func isJSONType(name string, v any) bool {
	switch name {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "null":
		return v == nil
	case "number":
		_, ok := v.(json.Number)
		return ok
	case "integer":
		n, ok := v.(json.Number)
		return ok && !strings.ContainsAny(string(n), ".eE")
	}
	return false
}

// TestJSONSchemaChecker: the checker refuses what the contract's schemas
// refuse, so a message that passes it means something.
func TestJSONSchemaChecker(t *testing.T) {
	s := newJSONSchemas(schemaDir)
	const meta = `"Metadata":{"kind":"expired","table":"t","eventID":"e","eventName":"REMOVE","sequenceNumber":"100000000000000000001","shardId":"s","streamArn":"a"}`
	cases := []struct {
		name, schema, doc, err string
	}{
		{"a line", "archive-line.schema.json", `{"Item":{"pk":{"S":"a"},"n":{"N":"1.50"},"b":{"B":"AAE="},"m":{"M":{"l":{"L":[{"NULL":true},{"BOOL":false},{"NS":["1","-2E+5"]}]}}}},"Keys":{"pk":{"S":"a"}},` + meta + `}`, ""},
		{"a number as a JSON number", "archive-line.schema.json", `{"Item":{"n":{"N":1.5}},"Keys":{},` + meta + `}`, "$.Item.n.N: json.Number is not of type string"},
		{"two type keys", "dynamodb-item.schema.json", `{"a":{"S":"x","N":"1"}}`, "2 members, maxProperties is 1"},
		{"an unknown type key", "dynamodb-item.schema.json", `{"a":{"X":"x"}}`, "$.a.X: the schema allows nothing here"},
		{"NULL false", "dynamodb-item.schema.json", `{"a":{"NULL":false}}`, "is not true"},
		{"bad base64", "dynamodb-item.schema.json", `{"a":{"B":"***"}}`, "does not match"},
		{"a number that is not one", "dynamodb-item.schema.json", `{"a":{"NS":["1","x"]}}`, `$.a.NS[1]: "x" does not match`},
		{"no Metadata", "archive-line.schema.json", `{"Item":{},"Keys":{}}`, `"Metadata" is required`},
		{"an unknown kind", "archive-line.schema.json", `{"Item":{},"Keys":{},` + strings.Replace(meta, "expired", "vanished", 1) + `}`, "is not one of"},
		{"a sequence number as a number", "archive-line.schema.json", `{"Item":{},"Keys":{},` + strings.Replace(meta, `"100000000000000000001"`, `100000000000000000001`, 1) + `}`, "sequenceNumber: json.Number is not of type string"},
		{"an unknown member", "archive-line.schema.json", `{"Item":{},"Keys":{},"Extra":1,` + meta + `}`, "$.Extra: the schema allows nothing here"},
		{"a plain item", "item.schema.json", `{"a":1.5,"b":[1,"x",null],"c":{"d":true}}`, ""},
		{"a plain item that is an array", "item.schema.json", `[1]`, "is not of type [object null]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := s.Validate(c.schema, []byte(c.doc))
			if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
				t.Fatalf("Validate = %v, want %q", err, c.err)
			}
		})
	}
	unknown := newJSONSchemas(t.TempDir())
	if err := os.WriteFile(filepath.Join(unknown.dir, "x.json"), []byte(`{"oneOf":[true]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := unknown.Validate("x.json", []byte(`1`)); err == nil || !strings.Contains(err.Error(), `keyword "oneOf"`) {
		t.Fatalf("a schema with an unknown keyword: %v", err)
	}
}
