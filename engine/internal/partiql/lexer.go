package partiql

import "strings"

type tokKind uint8

const (
	tEOF      tokKind = iota
	tIdent            // unquoted name or keyword
	tQuoted           // "quoted name"
	tString           // 'string'
	tNumber           // 12, 1.5, .5e3
	tParam            // ?
	tPunct            // ( ) [ ] { } , . : * ;
	tOp               // = <> != < <= > >= + -
	tBagOpen          // <<
	tBagClose         // >>
	tBad              // a character or literal the lexer cannot read
)

// token is one lexeme: its kind, its text (unquoted for names and strings)
// and its byte offset in the statement.
type token struct {
	kind tokKind
	text string
	pos  int
}

// lex splits a statement into tokens, skipping whitespace, `-- line` and
// `/* block */` comments. A character it cannot read, an unterminated
// string or comment, ends the list with a tBad token.
func lex(src string) []token {
	var out []token
	i := 0
	for {
		i = skipSpace(src, i)
		if i < 0 {
			return append(out, token{kind: tBad, pos: len(src)})
		}
		if i >= len(src) {
			return append(out, token{kind: tEOF, pos: len(src)})
		}
		t, next := lexOne(src, i)
		out = append(out, t)
		if t.kind == tBad {
			return out
		}
		i = next
	}
}

// skipSpace skips blanks and comments from i; -1 means an unterminated
// block comment.
func skipSpace(src string, i int) int {
	for i < len(src) {
		switch {
		case src[i] == ' ' || src[i] == '\t' || src[i] == '\n' || src[i] == '\r':
			i++
		case strings.HasPrefix(src[i:], "--"):
			nl := strings.IndexByte(src[i:], '\n')
			if nl < 0 {
				return len(src)
			}
			i += nl + 1
		case strings.HasPrefix(src[i:], "/*"):
			end := strings.Index(src[i+2:], "*/")
			if end < 0 {
				return -1
			}
			i += 2 + end + 2
		default:
			return i
		}
	}
	return i
}

func isIdentStart(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' }
func isDigit(c byte) bool      { return c >= '0' && c <= '9' }

func lexOne(src string, i int) (token, int) {
	c := src[i]
	switch {
	case isIdentStart(c):
		j := i + 1
		for j < len(src) && (isIdentStart(src[j]) || isDigit(src[j]) || src[j] == '$') {
			j++
		}
		return token{kind: tIdent, text: src[i:j], pos: i}, j
	case c == '"' || c == '\'':
		return lexQuoted(src, i)
	case isDigit(c) || c == '.' && i+1 < len(src) && isDigit(src[i+1]):
		return lexNumber(src, i)
	case c == '?':
		return token{kind: tParam, text: "?", pos: i}, i + 1
	case strings.ContainsRune("()[]{},.:*;", rune(c)):
		return token{kind: tPunct, text: src[i : i+1], pos: i}, i + 1
	}
	for _, op := range []string{"<<", ">>", "<>", "!=", "<=", ">=", "=", "<", ">", "+", "-"} {
		if strings.HasPrefix(src[i:], op) {
			switch op {
			case "<<":
				return token{kind: tBagOpen, text: op, pos: i}, i + 2
			case ">>":
				return token{kind: tBagClose, text: op, pos: i}, i + 2
			}
			return token{kind: tOp, text: op, pos: i}, i + len(op)
		}
	}
	return token{kind: tBad, text: src[i : i+1], pos: i}, i + 1
}

// lexQuoted reads a 'string' or a "name"; the quote is escaped by doubling.
func lexQuoted(src string, i int) (token, int) {
	q := src[i]
	kind := tString
	if q == '"' {
		kind = tQuoted
	}
	var b strings.Builder
	j := i + 1
	for j < len(src) {
		if src[j] == q {
			if j+1 < len(src) && src[j+1] == q {
				b.WriteByte(q)
				j += 2
				continue
			}
			return token{kind: kind, text: b.String(), pos: i}, j + 1
		}
		b.WriteByte(src[j])
		j++
	}
	return token{kind: tBad, pos: i}, len(src)
}

// lexNumber reads digits [. digits] [e [+-] digits]. A number followed
// directly by a letter (12abc) is not a number.
func lexNumber(src string, i int) (token, int) {
	j := i
	for j < len(src) && isDigit(src[j]) {
		j++
	}
	if j < len(src) && src[j] == '.' {
		j++
		for j < len(src) && isDigit(src[j]) {
			j++
		}
	}
	if j < len(src) && (src[j] == 'e' || src[j] == 'E') {
		k := j + 1
		if k < len(src) && (src[k] == '+' || src[k] == '-') {
			k++
		}
		if k < len(src) && isDigit(src[k]) {
			for k < len(src) && isDigit(src[k]) {
				k++
			}
			j = k
		}
	}
	if j < len(src) && (isIdentStart(src[j]) || src[j] == '.') {
		return token{kind: tBad, pos: i}, j
	}
	return token{kind: tNumber, text: src[i:j], pos: i}, j
}
