package main

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// A reader of Python literals, the part of Python's ast.literal_eval that
// NumPy uses to read an .npy header: strings, integers, True, False, None,
// tuples, lists and dicts, with Python's spelling of each (either quote,
// adjacent strings joined, integers in any base with underscores and an
// optional sign, trailing commas, comments, parentheses around a value).
// It exists so that gdn reads every header NumPy accepts, not only the
// one form NumPy writes.

// pyKind is the type of a Python literal.
type pyKind int

const (
	pyStr pyKind = iota
	pyInt
	pyBool
	pyNone
	pyTuple
	pyList
	pyDict
)

// pyValue is one Python literal. A dict's items are its keys and values
// alternating, in the order written.
type pyValue struct {
	kind  pyKind
	str   string   // pyStr
	num   *big.Int // pyInt
	bool  bool     // pyBool
	items []pyValue
}

// String renders v in Python's syntax, for error messages.
func (v pyValue) String() string {
	switch v.kind {
	case pyStr:
		return strconv.Quote(v.str)
	case pyInt:
		return v.num.String()
	case pyBool:
		if v.bool {
			return "True"
		}
		return "False"
	case pyNone:
		return "None"
	}
	var b strings.Builder
	open, close := map[pyKind]string{pyTuple: "(", pyList: "[", pyDict: "{"}[v.kind], map[pyKind]string{pyTuple: ")", pyList: "]", pyDict: "}"}[v.kind]
	b.WriteString(open)
	for i, it := range v.items {
		switch {
		case i == 0:
		case v.kind == pyDict && i%2 == 1:
			b.WriteString(": ")
		default:
			b.WriteString(", ")
		}
		b.WriteString(it.String())
	}
	if v.kind == pyTuple && len(v.items) == 1 {
		b.WriteString(",")
	}
	b.WriteString(close)
	return b.String()
}

// pyMaxDepth bounds the nesting of brackets, so that a hostile header
// cannot exhaust the stack.
const pyMaxDepth = 32

// parsePyLiteral reads the one Python literal that s holds, whitespace and
// comments around it allowed.
func parsePyLiteral(s string) (pyValue, error) {
	p := &pyParser{s: s}
	v, err := p.value(0)
	if err != nil {
		return v, err
	}
	p.space()
	if p.i < len(p.s) {
		return v, p.errorf("unexpected %q after the value", p.rest())
	}
	return v, nil
}

// pyParser is the state of parsePyLiteral: the text and the offset read.
type pyParser struct {
	s string
	i int
}

func (p *pyParser) errorf(format string, args ...any) error {
	return fmt.Errorf("at offset %d: %s", p.i, fmt.Sprintf(format, args...))
}

// rest is what is left to read, cut short for a message.
func (p *pyParser) rest() string {
	r := p.s[p.i:]
	if len(r) > 16 {
		r = r[:16] + "..."
	}
	return r
}

// space skips whitespace and comments.
func (p *pyParser) space() {
	for p.i < len(p.s) {
		switch c := p.s[p.i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			p.i++
		case c == '#':
			for p.i < len(p.s) && p.s[p.i] != '\n' {
				p.i++
			}
		default:
			return
		}
	}
}

// peek returns the next byte after whitespace, or 0 at the end.
func (p *pyParser) peek() byte {
	p.space()
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *pyParser) value(depth int) (pyValue, error) {
	if depth > pyMaxDepth {
		return pyValue{}, p.errorf("nested deeper than %d", pyMaxDepth)
	}
	switch c := p.peek(); {
	case c == 0:
		return pyValue{}, p.errorf("a value is missing")
	case c == '(':
		return p.sequence(depth, '(', ')', pyTuple)
	case c == '[':
		return p.sequence(depth, '[', ']', pyList)
	case c == '{':
		return p.sequence(depth, '{', '}', pyDict)
	case c == '\'' || c == '"' || (strings.IndexByte("uUrR", c) >= 0 && p.i+1 < len(p.s) && (p.s[p.i+1] == '\'' || p.s[p.i+1] == '"')):
		return p.strings()
	case c == '+' || c == '-' || (c >= '0' && c <= '9'):
		return p.integer()
	}
	for word, v := range map[string]pyValue{"True": {kind: pyBool, bool: true}, "False": {kind: pyBool}, "None": {kind: pyNone}} {
		if strings.HasPrefix(p.s[p.i:], word) && !pyNameByte(p.s, p.i+len(word)) {
			p.i += len(word)
			return v, nil
		}
	}
	return pyValue{}, p.errorf("unexpected %q", p.rest())
}

// pyNameByte reports whether s[i] continues a name (so "Falsey" is not False).
func pyNameByte(s string, i int) bool {
	if i >= len(s) {
		return false
	}
	c := s[i]
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// sequence reads a tuple, list or dict from its opening bracket. A
// parenthesised single value without a comma is that value, as in Python.
func (p *pyParser) sequence(depth int, open, close byte, kind pyKind) (pyValue, error) {
	p.i++ // open
	v := pyValue{kind: kind}
	comma := false
	for {
		if p.peek() == close {
			p.i++
			if kind == pyTuple && len(v.items) == 1 && !comma {
				return v.items[0], nil
			}
			return v, nil
		}
		if len(v.items) > 0 && !comma {
			return v, p.errorf("expected ',' or '%c', found %q", close, p.rest())
		}
		item, err := p.value(depth + 1)
		if err != nil {
			return v, err
		}
		v.items = append(v.items, item)
		if kind == pyDict {
			if p.peek() != ':' {
				return v, p.errorf("expected ':' after a key, found %q", p.rest())
			}
			p.i++
			val, err := p.value(depth + 1)
			if err != nil {
				return v, err
			}
			v.items = append(v.items, val)
		}
		comma = p.peek() == ','
		if comma {
			p.i++
		}
	}
}

// strings reads one string literal or several adjacent ones, joined.
func (p *pyParser) strings() (pyValue, error) {
	var b strings.Builder
	for n := 0; ; n++ {
		c := p.peek()
		raw := false
		if c == 'r' || c == 'R' || c == 'u' || c == 'U' {
			if p.i+1 >= len(p.s) || (p.s[p.i+1] != '\'' && p.s[p.i+1] != '"') {
				break
			}
			raw = c == 'r' || c == 'R'
			p.i++
			c = p.s[p.i]
		}
		if c != '\'' && c != '"' {
			if n == 0 {
				return pyValue{}, p.errorf("expected a string")
			}
			break
		}
		if err := p.quoted(c, raw, &b); err != nil {
			return pyValue{}, err
		}
	}
	return pyValue{kind: pyStr, str: b.String()}, nil
}

// quoted reads one single-line string delimited by q into b, with Python's
// common escapes (an unknown escape stays as written, as in Python).
func (p *pyParser) quoted(q byte, raw bool, b *strings.Builder) error {
	p.i++ // opening quote
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == q:
			p.i++
			return nil
		case c == '\n':
			return p.errorf("a string runs past the end of its line")
		case c == '\\' && !raw && p.i+1 < len(p.s):
			e := p.s[p.i+1]
			p.i += 2
			switch e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case '0':
				b.WriteByte(0)
			case '\\', '\'', '"':
				b.WriteByte(e)
			case 'x':
				if p.i+2 > len(p.s) {
					return p.errorf("a \\x escape is cut short")
				}
				x, err := strconv.ParseUint(p.s[p.i:p.i+2], 16, 8)
				if err != nil {
					return p.errorf("bad \\x escape %q", p.s[p.i:p.i+2])
				}
				b.WriteByte(byte(x))
				p.i += 2
			default:
				b.WriteByte('\\')
				b.WriteByte(e)
			}
		default:
			b.WriteByte(c)
			p.i++
		}
	}
	return p.errorf("a string is not closed")
}

// integer reads an integer literal with an optional sign: decimal (no
// leading zero), 0x, 0o or 0b, underscores between digits, and the L suffix
// of Python 2 (NumPy reads the headers Python 2 wrote).
func (p *pyParser) integer() (pyValue, error) {
	start := p.i
	neg := false
	if c := p.s[p.i]; c == '+' || c == '-' {
		neg = c == '-'
		p.i++
		p.space()
	}
	j := p.i
	for j < len(p.s) && pyNameByte(p.s, j) {
		j++
	}
	lit := p.s[p.i:j]
	lit = strings.TrimSuffix(strings.TrimSuffix(lit, "L"), "l")
	if lit == "" || lit[0] < '0' || lit[0] > '9' {
		p.i = start
		return pyValue{}, p.errorf("expected a number, found %q", p.rest())
	}
	if len(lit) > 1 && lit[0] == '0' && strings.Trim(lit, "0_") != "" && strings.IndexByte("xXoObB", lit[1]) < 0 {
		return pyValue{}, p.errorf("leading zeros in %q are not a Python integer", lit)
	}
	n, ok := new(big.Int).SetString(lit, 0) // base prefixes and underscores, as Python
	if !ok {
		return pyValue{}, p.errorf("%q is not an integer", p.s[p.i:j])
	}
	p.i = j
	if neg {
		n.Neg(n)
	}
	return pyValue{kind: pyInt, num: n}, nil
}
