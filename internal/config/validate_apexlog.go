package config

import (
	"fmt"

	"github.com/sf2loki/sf2loki/internal/sfrules"
)

// checkApexLog checks each org's sources.apexlog users: each is put in the
// source's query, so only a conservative charset passes.
func (c *Config) checkApexLog(orgs []orgSection, add func(path, format string, args ...any)) {
	for _, o := range orgs {
		for i, u := range o.src.ApexLog.Users {
			if !sfrules.ValidUsername(u) {
				add(fmt.Sprintf("%ssources.apexlog.users[%d]", o.prefix, i),
					"%q is not a username sf2loki puts in a query: letters, digits and . _ + - around one @, at most 80 characters", u)
			}
		}
	}
}
