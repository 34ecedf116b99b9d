package shape_test

import (
	"fmt"
	"maps"
	"testing"

	"github.com/sf2loki/sf2loki/internal/domain/shape"
)

// apiRow is an EventLogFile API row of 100 columns.
func apiRow() map[string]string {
	row := map[string]string{"USER_ID": "005000000000001", "CLIENT_IP": "10.1.2.3", "URI": "/services/data/v60.0/sobjects/Account/001000000000001AAA",
		"REQUEST_ID": "4-abc", "STATUS_CODE": "200"}
	for i := len(row); i < 100; i++ {
		row[fmt.Sprintf("COLUMN_%02d", i)] = fmt.Sprint(i)
	}
	return row
}

// BenchmarkPlan measures one row through a plan: none configured, three
// named fields (hash, mask, regex_replace), the same by glob, and sampling.
func BenchmarkPlan(b *testing.B) {
	three := []shape.Rule{
		{Action: shape.Hash, Fields: []string{"USER_ID"}},
		{Action: shape.Mask, Fields: []string{"CLIENT_IP"}},
		{Action: shape.RegexReplace, Fields: []string{"URI"}, Pattern: `[0-9A-Za-z]{18}$`, Replacement: ":id"},
	}
	globs := []shape.Rule{
		{Action: shape.Hash, Fields: []string{"USER_*"}},
		{Action: shape.Mask, Fields: []string{"*_IP"}},
		{Action: shape.RegexReplace, Fields: []string{"UR?"}, Pattern: `[0-9A-Za-z]{18}$`, Replacement: ":id"},
	}
	for _, bc := range []struct {
		name string
		cfg  shape.Config
	}{
		{"none", shape.Config{}},
		{"three-named", shape.Config{Salt: "pepper", Rules: three}},
		{"three-globs", shape.Config{Salt: "pepper", Rules: globs}},
		{"sample-0.25", shape.Config{Sample: map[string]float64{"API": 0.25}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p := mustNew(b, bc.cfg).For("API")
			src := apiRow()
			row := maps.Clone(src)
			b.ReportAllocs()
			for b.Loop() {
				for k, v := range src {
					row[k] = v
				}
				if p.Keep(row["REQUEST_ID"]) {
					p.Strings(row)
				}
			}
		})
	}
}

func BenchmarkKeep(b *testing.B) {
	p := mustNew(b, shape.Config{Sample: map[string]float64{"API": 0.25}}).For("API")
	b.ReportAllocs()
	for b.Loop() {
		p.Keep("4-abcdefghijklmnopqrstuvwxyz")
	}
}
