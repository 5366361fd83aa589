package expr

type tokKind uint8

const (
	tEOF tokKind = iota
	tIdent
	tName  // #name
	tValue // :value
	tNumber
	tLParen
	tRParen
	tLBracket
	tRBracket
	tComma
	tDot
	tEq
	tNe
	tLt
	tLe
	tGt
	tGe
	tPlus
	tMinus
	tInvalid
)

// token is one lexeme: its kind and its span in the source.
type token struct {
	kind       tokKind
	start, end int
}

// lexer produces tokens on demand, without allocating.
type lexer struct {
	src string
	pos int
}

// isIdentStart: names start with a letter. DynamoDB rejects a leading
// underscore as a one-character token ("__typename" is a syntax error at
// "_"), so such names need an ExpressionAttributeNames placeholder.
func isIdentStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isIdentChar(c byte) bool {
	return isIdentStart(c) || c == '_' || c >= '0' && c <= '9'
}

func (l *lexer) next() token {
	s := l.src
	for l.pos < len(s) && (s[l.pos] == ' ' || s[l.pos] == '\t' || s[l.pos] == '\n' || s[l.pos] == '\r') {
		l.pos++
	}
	start := l.pos
	if start >= len(s) {
		return token{tEOF, start, start}
	}
	c := s[start]
	l.pos++
	k := tInvalid
	switch {
	case isIdentStart(c):
		for l.pos < len(s) && isIdentChar(s[l.pos]) {
			l.pos++
		}
		k = tIdent
	case c >= '0' && c <= '9':
		for l.pos < len(s) && s[l.pos] >= '0' && s[l.pos] <= '9' {
			l.pos++
		}
		k = tNumber
	case c == '#' || c == ':':
		for l.pos < len(s) && isIdentChar(s[l.pos]) {
			l.pos++
		}
		if l.pos == start+1 {
			k = tInvalid
		} else if c == '#' {
			k = tName
		} else {
			k = tValue
		}
	case c == '(':
		k = tLParen
	case c == ')':
		k = tRParen
	case c == '[':
		k = tLBracket
	case c == ']':
		k = tRBracket
	case c == ',':
		k = tComma
	case c == '.':
		k = tDot
	case c == '=':
		k = tEq
	case c == '+':
		k = tPlus
	case c == '-':
		k = tMinus
	case c == '<':
		k = tLt
		if l.pos < len(s) && s[l.pos] == '=' {
			l.pos++
			k = tLe
		} else if l.pos < len(s) && s[l.pos] == '>' {
			l.pos++
			k = tNe
		}
	case c == '>':
		k = tGt
		if l.pos < len(s) && s[l.pos] == '=' {
			l.pos++
			k = tGe
		}
	default:
		// One (possibly multi-byte) character as the offending token.
		for l.pos < len(s) && s[l.pos]&0xC0 == 0x80 {
			l.pos++
		}
	}
	return token{k, start, l.pos}
}

// keyword reports whether an identifier token spells kw (upper case), ignoring case.
func keyword(src string, t token, kw string) bool {
	if t.kind != tIdent || t.end-t.start != len(kw) {
		return false
	}
	for i := 0; i < len(kw); i++ {
		c := src[t.start+i]
		if c >= 'a' && c <= 'z' {
			c -= 'a' - 'A'
		}
		if c != kw[i] {
			return false
		}
	}
	return true
}
