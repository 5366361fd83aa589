package attr

// Scanning compact JSON as AppendItemJSON writes it, without decoding: the
// engine cuts key attributes out of stored items, and the stream finds them
// in the images it keeps.

// SkipString returns the index just past the JSON string starting at b[i]
// (a '"'), or len(b) when the string does not end.
func SkipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// SkipValue returns the index just past the compact JSON value starting at
// b[i], or the index of the '}' or ']' that ends the enclosing object or
// array when there is no value there.
func SkipValue(b []byte, i int) int {
	depth := 0
	for i < len(b) {
		switch b[i] {
		case '"':
			i = SkipString(b, i)
			if depth == 0 {
				return i
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i // the end of the enclosing object
			}
			depth--
			if depth == 0 {
				return i + 1
			}
		case ',':
			if depth == 0 {
				return i
			}
		}
		i++
	}
	return i
}

// MemberEnd returns the index just past the object member ("name":value)
// starting at b[i], or -1 when b[i] does not start one.
func MemberEnd(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	j := SkipString(b, i)
	if j >= len(b) || b[j] != ':' {
		return -1
	}
	return SkipValue(b, j+1)
}
