package sinkapi

import (
	"fmt"
	"strings"
)

// CheckTableName refuses table names that would escape a sink's
// directory or prefix (a destination rejects their events). DynamoDB names are [a-zA-Z0-9_.-]{3,255}; anything else is a bug upstream.
func CheckTableName(t string) error {
	if t == "" || t == "." || t == ".." || strings.ContainsAny(t, `/\`+"\x00") {
		return fmt.Errorf("table name %q cannot be a directory name", t)
	}
	return nil
}
