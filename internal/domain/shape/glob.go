package shape

import (
	"strings"
	"unicode/utf8"
)

// Glob is a compiled glob: * matches any run of characters (/ included, the
// empty run too), ? exactly one character (one UTF-8 sequence); every
// other character matches itself. There is no escape: a glob cannot match
// a literal * or ? only.
type Glob struct {
	pattern string
	kind    globKind
	lit     string // the literal of the exact, prefix, suffix and contains kinds
}

type globKind uint8

const (
	globExact    globKind = iota // no * or ?
	globAny                      // *
	globPrefix                   // lit*
	globSuffix                   // *lit
	globContains                 // *lit*
	globGeneral
)

// CompileGlob compiles pattern. Every string is a glob.
func CompileGlob(pattern string) Glob {
	g := Glob{pattern: pattern, kind: globGeneral}
	if strings.Contains(pattern, "?") {
		return g
	}
	stars := strings.Count(pattern, "*")
	switch {
	case stars == 0:
		g.kind, g.lit = globExact, pattern
	case strings.Trim(pattern, "*") == "":
		g.kind = globAny
	case stars == 1 && strings.HasSuffix(pattern, "*"):
		g.kind, g.lit = globPrefix, pattern[:len(pattern)-1]
	case stars == 1 && strings.HasPrefix(pattern, "*"):
		g.kind, g.lit = globSuffix, pattern[1:]
	case stars == 2 && len(pattern) > 2 && pattern[0] == '*' && pattern[len(pattern)-1] == '*':
		g.kind, g.lit = globContains, pattern[1:len(pattern)-1]
	}
	return g
}

// IsGlob reports whether pattern holds a * or a ? (else it names one
// string).
func IsGlob(pattern string) bool { return strings.ContainsAny(pattern, "*?") }

// MatchGlob reports whether s matches pattern (compiled each call: for a
// pattern used often, compile it once).
func MatchGlob(pattern, s string) bool { return CompileGlob(pattern).Match(s) }

// String returns the pattern.
func (g Glob) String() string { return g.pattern }

// Match reports whether s matches the glob.
func (g Glob) Match(s string) bool {
	switch g.kind {
	case globExact:
		return s == g.lit
	case globAny:
		return true
	case globPrefix:
		return strings.HasPrefix(s, g.lit)
	case globSuffix:
		return strings.HasSuffix(s, g.lit)
	case globContains:
		return strings.Contains(s, g.lit)
	}
	return matchGeneral(g.pattern, s)
}

// matchGeneral matches with one backtracking point, the last star: on a
// mismatch the star takes one more character (a whole UTF-8 sequence, so
// that a ? never matches half of one). Linear in len(p)·len(s) at worst.
func matchGeneral(p, s string) bool {
	px, sx := 0, 0
	starP, starS := -1, 0
	for px < len(p) || sx < len(s) {
		if px < len(p) {
			switch c := p[px]; c {
			case '*':
				starP, starS = px, sx
				px++
				continue
			case '?':
				if sx < len(s) {
					_, n := utf8.DecodeRuneInString(s[sx:])
					px++
					sx += n
					continue
				}
			default:
				if sx < len(s) && s[sx] == c {
					px++
					sx++
					continue
				}
			}
		}
		if starP >= 0 && starS < len(s) {
			_, n := utf8.DecodeRuneInString(s[starS:])
			starS += n
			px, sx = starP+1, starS
			continue
		}
		return false
	}
	return true
}
