package attr

// RequestReader reads the members of a request body's top-level JSON object
// one by one, for the engine's fast paths: the hot requests (PutItem,
// GetItem) in the shape SDKs send them, decoded without encoding/json's
// reflection. It accepts only plain input: member names and string values
// in printable ASCII without escapes, booleans, and attribute maps that
// UnmarshalItemJSON accepts. On anything else, and on whatever member the
// caller refuses with Fail, OK reports false and the caller decodes the
// body with encoding/json instead, so that the fast path never answers a
// request differently: every body it accepts is valid JSON that
// encoding/json decodes to the same values.
type RequestReader struct {
	d      decoder
	failed bool
	done   bool // the closing brace and trailing space were read
	member bool // at least one member was read
}

// NewRequestReader starts reading body, which must hold a JSON object.
func NewRequestReader(body []byte) RequestReader {
	r := RequestReader{d: decoder{b: body}}
	if r.d.expect('{') != nil {
		r.failed = true
	}
	return r
}

// Next moves to the next member and returns its name; ok is false at the
// end of the object or once the reader has failed.
func (r *RequestReader) Next() (name []byte, ok bool) {
	if r.failed || r.done {
		return nil, false
	}
	r.d.ws()
	switch c := r.d.peek(); {
	case c == '}':
		r.d.i++
		r.d.ws()
		r.done = true
		r.failed = r.d.i != len(r.d.b)
		return nil, false
	case r.member && c == ',':
		r.d.i++
	case r.member:
		r.failed = true
		return nil, false
	}
	r.member = true
	name, ok = r.plain()
	if !ok || r.d.expect(':') != nil {
		r.failed = true
		return nil, false
	}
	return name, true
}

// OK reports whether the whole body was read and nothing was refused.
func (r *RequestReader) OK() bool { return r.done && !r.failed }

// Fail refuses the body: OK will report false.
func (r *RequestReader) Fail() { r.failed = true }

// String reads the current member's value as a plain string.
func (r *RequestReader) String() string {
	s, ok := r.plain()
	if !ok {
		r.failed = true
		return ""
	}
	return string(s)
}

// Bool reads the current member's value as true or false.
func (r *RequestReader) Bool() bool {
	r.d.ws()
	switch {
	case r.d.lit("true"):
		return true
	case r.d.lit("false"):
		return false
	}
	r.failed = true
	return false
}

// Item reads the current member's value as an attribute map (not null).
// A map that UnmarshalItemJSON would refuse fails the reader: the caller's
// slow path reports its error.
func (r *RequestReader) Item() Item {
	if r.failed {
		return nil
	}
	it, err := r.d.object(0)
	if err != nil {
		r.failed = true
		return nil
	}
	return it
}

// plain reads a JSON string of printable ASCII without escapes and
// returns its bytes (aliasing the body).
func (r *RequestReader) plain() ([]byte, bool) {
	if r.failed {
		return nil, false
	}
	d := &r.d
	d.ws()
	if d.peek() != '"' {
		return nil, false
	}
	start := d.i + 1
	for i := start; i < len(d.b); i++ {
		switch c := d.b[i]; {
		case c == '"':
			d.i = i + 1
			return d.b[start:i], true
		case c < 0x20 || c > 0x7e || c == '\\':
			return nil, false
		}
	}
	return nil, false
}

// Attr is one member of an attribute map read without a Go map.
type Attr struct {
	Name  string
	Value Value
}

// Attrs reads the current member's value as an attribute map (not null)
// and appends its members to dst in their order, duplicates included: for
// small maps such as a Key, where building a Go map costs more than the
// rest of the read. It accepts what Item accepts.
func (r *RequestReader) Attrs(dst []Attr) []Attr {
	if r.failed {
		return nil
	}
	d := &r.d
	if d.expect('{') != nil {
		r.failed = true
		return nil
	}
	d.ws()
	if d.peek() == '}' {
		d.i++
		return dst
	}
	for {
		k, err := d.str()
		if err == nil {
			err = d.expect(':')
		}
		var x Value
		if err == nil {
			x, err = d.value(0)
		}
		if err != nil {
			r.failed = true
			return nil
		}
		dst = append(dst, Attr{k, x})
		d.ws()
		switch d.peek() {
		case ',':
			d.i++
			continue
		case '}':
			d.i++
			return dst
		}
		r.failed = true
		return nil
	}
}
