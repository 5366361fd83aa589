package attr

// SizeOf returns the size DynamoDB accounts for one attribute: the UTF-8
// length of its name plus the size of its value.
//
// Value sizes follow DynamoDB's documented rules: S is its UTF-8 length; N
// is 1 byte per two significant digits plus 1; B is its raw length; BOOL and
// NULL are 1; a set is the sum of its members; M and L are 3 bytes plus, for
// every element, 1 byte plus the element's size (and for M its key's
// length).
func SizeOf(name string, v Value) int { return len(name) + valueSize(v) }

// ItemSize returns the size of a whole item (the 400 KB limit applies to it).
func ItemSize(it Item) int {
	n := 0
	for k, v := range it {
		n += len(k) + valueSize(v)
	}
	return n
}

// ValueSize returns the size of a value without an attribute name.
func ValueSize(v Value) int { return valueSize(v) }

func valueSize(v Value) int {
	switch v.T {
	case S:
		return len(v.S)
	case N:
		return numberSize(v.S)
	case B:
		return len(v.B)
	case BOOL, NULL:
		return 1
	case SS:
		n := 0
		for _, s := range v.SS {
			n += len(s)
		}
		return n
	case NS:
		n := 0
		for _, s := range v.SS {
			n += numberSize(s)
		}
		return n
	case BS:
		n := 0
		for _, b := range v.BS {
			n += len(b)
		}
		return n
	case M:
		n := 3
		for k, x := range v.M {
			n += 1 + len(k) + valueSize(x)
		}
		return n
	case L:
		n := 3
		for _, x := range v.L {
			n += 1 + valueSize(x)
		}
		return n
	}
	return 0
}

func numberSize(s string) int {
	n, msg := parseNumber(s)
	d := n.nd()
	if msg != "" {
		d = len(s)
	}
	return (d+1)/2 + 1
}
