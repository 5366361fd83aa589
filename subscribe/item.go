package subscribe

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// plainItem reads the body of an item-format message: the item as plain
// JSON (event.PlainJSON). Strings become S, numbers N with their exact
// digits, true and false BOOL, null NULL, arrays L and objects M. What
// plain JSON lost (binary, sets) cannot come back: see the package doc.
func plainItem(data []byte) (map[string]ddb.AttributeValue, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("item: %w", err)
	}
	if dec.More() {
		return nil, errors.New("item: more than one JSON value")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("item: %s, want an object", jsonKind(v))
	}
	return plainMap(m), nil
}

func plainMap(m map[string]any) map[string]ddb.AttributeValue {
	out := make(map[string]ddb.AttributeValue, len(m))
	for k, v := range m {
		out[k] = plainValue(v)
	}
	return out
}

// plainValue converts one value of json.Decoder (with UseNumber), which
// yields no other types.
func plainValue(v any) ddb.AttributeValue {
	switch x := v.(type) {
	case string:
		return &ddb.AttributeValueMemberS{Value: x}
	case json.Number:
		return &ddb.AttributeValueMemberN{Value: x.String()}
	case bool:
		return &ddb.AttributeValueMemberBOOL{Value: x}
	case []any:
		l := make([]ddb.AttributeValue, len(x))
		for i, e := range x {
			l[i] = plainValue(e)
		}
		return &ddb.AttributeValueMemberL{Value: l}
	case map[string]any:
		return &ddb.AttributeValueMemberM{Value: plainMap(x)}
	}
	return &ddb.AttributeValueMemberNULL{Value: true}
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "an array"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "a value"
}
