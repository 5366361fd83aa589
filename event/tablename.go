package event

import "fmt"

// ValidTableName applies DynamoDB's rules for a table (or index) name: 3
// to 255 characters, each a letter, a digit, '_', '-' or '.'. It is the
// one check of a name that arrives from outside: a flag, a checkpoint URL,
// or a ListTables answer of an endpoint that may not follow them. Such a
// name needs no escaping in a key, a path or a metric label, but "." and
// ".." are valid (a sink that makes directories of names refuses those
// itself).
func ValidTableName(name string) error {
	if len(name) < 3 || len(name) > 255 {
		return fmt.Errorf("name %q must be 3 to 255 characters long", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return fmt.Errorf("name %q contains %q; allowed are letters, digits, '_', '-' and '.'", name, r)
		}
	}
	return nil
}
