package sfrules

import "strings"

// Auth modes.
const (
	JWTBearer         = "jwt_bearer"
	ClientCredentials = "client_credentials"
)

// GenericLoginHost reports whether host is login.salesforce.com or
// test.salesforce.com, which the client credentials flow does not support.
func GenericLoginHost(host string) bool {
	h := strings.ToLower(host)
	return h == "login.salesforce.com" || h == "test.salesforce.com"
}

// NotALoginHost says, for a host that serves an org's pages but not its
// OAuth token endpoint, which login host to use instead. Salesforce's My
// Domain URL formats
// (https://help.salesforce.com/s/articleView?id=sf.domain_name_url_formats.htm&type=5)
// give an org its login URL on my.salesforce.com and its Lightning
// Experience pages on lightning.force.com (Visualforce on vf.force.com,
// Setup on my.salesforce-setup.com): the token endpoint is on the first.
// "" means host is not one of those.
func NotALoginHost(host string) (what, use string) {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	for _, d := range []struct{ suffix, what string }{
		{".lightning.force.com", "the org's Lightning Experience host"},
		{".my.salesforce-setup.com", "the org's Setup host"},
	} {
		if name, ok := strings.CutSuffix(h, d.suffix); ok && name != "" {
			return d.what, "https://" + name + ".my.salesforce.com"
		}
	}
	if strings.HasSuffix(h, ".vf.force.com") || strings.HasSuffix(h, ".visual.force.com") {
		return "a Visualforce host", "https://<name>.my.salesforce.com"
	}
	return "", ""
}
