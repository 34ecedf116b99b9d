package shape

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A regex_replace rule's pattern and replacement are regexp syntax and are
// taken as written: nothing in them is read from the environment. The
// checks below refuse what, written so, could not mean what its writer
// meant: a replacement's reference to a group the pattern does not have
// (Go's Expand would put nothing there), and a pattern's ${NAME} (an
// end-of-text anchor before a literal {NAME}: it can match nothing).

// groupRef is one group reference of a replacement.
type groupRef struct {
	text  string // as written: $1, ${1}, $name or ${name}
	name  string // the name or number inside
	num   int    // the group's number, or -1 for a name
	brace bool
}

// groupRefs lists the group references of a replacement as Go's
// regexp.Expand reads them: $$ is a literal $; $ then a name (the longest
// run of letters, digits and _) or a name in braces is a reference, by
// number when the name is a number without a leading zero; any other $
// is literal.
func groupRefs(template string) []groupRef {
	var refs []groupRef
	for {
		i := strings.IndexByte(template, '$')
		if i < 0 {
			return refs
		}
		template = template[i+1:]
		if strings.HasPrefix(template, "$") {
			template = template[1:]
			continue
		}
		ref, rest, ok := groupRefAt(template)
		if !ok {
			continue
		}
		refs = append(refs, ref)
		template = rest
	}
}

// groupRefAt reads the reference s starts with (s follows a $), and what
// follows it.
func groupRefAt(s string) (groupRef, string, bool) {
	brace := strings.HasPrefix(s, "{")
	body := s
	if brace {
		body = s[1:]
	}
	n := 0
	for n < len(body) {
		r, size := utf8.DecodeRuneInString(body[n:])
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' {
			break
		}
		n += size
	}
	if n == 0 {
		return groupRef{}, "", false
	}
	name, rest := body[:n], body[n:]
	if brace {
		if !strings.HasPrefix(rest, "}") {
			return groupRef{}, "", false
		}
		rest = rest[1:]
	}
	return groupRef{text: "$" + s[:len(s)-len(rest)], name: name, num: groupNumber(name), brace: brace}, rest, true
}

// groupNumber is name as a group number, or -1 when it is a name (Expand
// reads digits with a leading zero, or past 10^8, as a name).
func groupNumber(name string) int {
	if len(name) > 1 && name[0] == '0' {
		return -1
	}
	num := 0
	for i := 0; i < len(name); i++ {
		if name[i] < '0' || name[i] > '9' || num >= 1e8 {
			return -1
		}
		num = num*10 + int(name[i]-'0')
	}
	return num
}

// hasGroup reports whether re has the group name (a number, or a name).
func hasGroup(re *regexp.Regexp, name string) bool {
	if num := groupNumber(name); num >= 0 {
		return num <= re.NumSubexp()
	}
	return slices.Contains(re.SubexpNames()[1:], name)
}

// replacementProblems says, for each reference of repl that names no
// group of re, what is wrong and what to write.
func replacementProblems(re *regexp.Regexp, repl string) []string {
	var out []string
	seen := map[string]bool{}
	for _, ref := range groupRefs(repl) {
		if hasGroup(re, ref.name) || seen[ref.text] {
			continue
		}
		seen[ref.text] = true
		msg := fmt.Sprintf("%s names no group of pattern (%s); a replacement is read as written, never from the environment: "+
			"refer to a group by number or name, and write $$ for a literal $", ref.text, groupsOf(re))
		if !ref.brace {
			// Expand reads the longest name: $1x is the group "1x". Name
			// the group a shorter prefix would be.
			for end := len(ref.name) - 1; end > 0; end-- {
				if prefix := ref.name[:end]; hasGroup(re, prefix) {
					msg += fmt.Sprintf("; for the group %s followed by %q, write ${%s}%s", prefix, ref.name[end:], prefix, ref.name[end:])
					break
				}
			}
		}
		out = append(out, msg)
	}
	return out
}

// groupsOf describes the groups of re a replacement can refer to.
func groupsOf(re *regexp.Regexp) string {
	n := re.NumSubexp()
	if n == 0 {
		return "it has no group: only $0, the whole match"
	}
	s := "its groups are $0 (the whole match) to $" + fmt.Sprint(n)
	if n == 1 {
		s = "its groups are $0 (the whole match) and $1"
	}
	var named []string
	for _, name := range re.SubexpNames()[1:] {
		if name != "" && !slices.Contains(named, "${"+name+"}") {
			named = append(named, "${"+name+"}")
		}
	}
	if len(named) > 0 {
		s += ", by name " + strings.Join(named, ", ")
	}
	return s
}

// placeholderInPattern finds ${NAME} in a pattern.
var placeholderInPattern = regexp.MustCompile(`\$\{[A-Za-z_][A-Za-z0-9_]*\}`)

// patternProblems says, for each ${NAME} of pattern whose $ is not escaped
// by a backslash, why it is refused and what to write: $ there is the
// end-of-text anchor (or, with (?m), end-of-line), and a literal { cannot
// follow it, so it matches nothing; a writer meant an environment
// variable, which a pattern never reads, or the text ${NAME}.
func patternProblems(pattern string) []string {
	var out []string
	seen := map[string]bool{}
	for _, loc := range placeholderInPattern.FindAllStringIndex(pattern, -1) {
		slashes := 0
		for i := loc[0] - 1; i >= 0 && pattern[i] == '\\'; i-- {
			slashes++
		}
		text := pattern[loc[0]:loc[1]]
		if slashes%2 == 1 || seen[text] {
			continue
		}
		seen[text] = true
		out = append(out, fmt.Sprintf("%s matches nothing: its $ is the end-of-text anchor; a pattern is read as written, never from the environment: "+
			"write \\%s to match the text %s", text, text, text))
	}
	return out
}
