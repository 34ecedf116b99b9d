package testenv

import "strings"

// LogLines returns the lines of out that contain every one of want.
func LogLines(out string, want ...string) []string {
	var got []string
	for l := range strings.SplitSeq(out, "\n") {
		ok := l != ""
		for _, w := range want {
			ok = ok && strings.Contains(l, w)
		}
		if ok {
			got = append(got, l)
		}
	}
	return got
}
