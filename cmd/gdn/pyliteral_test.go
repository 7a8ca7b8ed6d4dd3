package main

import (
	"strings"
	"testing"
)

func TestParsePyLiteral(t *testing.T) {
	for in, want := range map[string]string{
		"{'a': (1, 2,), 'b': [True, None], }":  `{"a": (1, 2), "b": [True, None]}`,
		`("x" 'y', -0b101, 0o17, 1_000)`:       `("xy", -5, 15, 1000)`,
		"((7),)":                               "(7,)",
		"(7)":                                  "7",
		"()":                                   "()",
		"'a\\'b\\x41\\n'":                      `"a'bA\n"`,
		"r'a\\n'":                              `"a\\n"`,
		"  123456789012345678901234567890 # c": "123456789012345678901234567890",
	} {
		v, err := parsePyLiteral(in)
		if err != nil || v.String() != want {
			t.Errorf("parsePyLiteral(%q) = %s, %v; want %s", in, v, err, want)
		}
	}
	for in, want := range map[string]string{
		"":                                  "a value is missing",
		"'abc":                              "not closed",
		"'a\nb'":                            "end of its line",
		"(1 2)":                             "expected ','",
		"{'a' 1}":                           "expected ':'",
		"007":                               "leading zeros",
		"0x":                                "not an integer",
		"Truth":                             "unexpected",
		"1 2":                               "after the value",
		strings.Repeat("[", 100):            "nested deeper",
		"-'a'":                              "expected a number",
		"{'a': 1, 'b': }":                   "unexpected",
		"{'a': 1,, 'b': 2}":                 "unexpected",
		"'\\x4'":                            "\\x escape",
		"{" + strings.Repeat("1:", 3) + "}": "expected ','",
	} {
		if v, err := parsePyLiteral(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parsePyLiteral(%q) = %s, %v; want an error containing %q", in, v, err, want)
		}
	}
}
