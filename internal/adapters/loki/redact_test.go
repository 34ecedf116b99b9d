package loki_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/internal/adapters/loki"
)

// A proxy that refuses the push and quotes the request's headers must not
// put the token (bearer, basic auth or a URL password) into an error, a log
// line or the sink's name.
func TestAnswersQuotingTheCredentialsAreRedacted(t *testing.T) {
	const token = "glc_eyJvIjoiMTIzNCIsIm4iOiJ0b2tlbiJ9"
	const password = "url-pa55word"
	for _, tc := range []struct {
		name   string
		mutate func(*loki.Config)
		leaks  []string
	}{
		{"bearer", func(c *loki.Config) { c.AuthToken = token }, []string{token}},
		{"basic", func(c *loki.Config) { c.AuthToken, c.TenantID = token, "tenant-7" },
			[]string{token, base64.StdEncoding.EncodeToString([]byte("tenant-7:" + token))}},
		{"url password", func(c *loki.Config) {
			u, _ := url.Parse(c.URL)
			u.User = url.UserPassword("user", password)
			c.URL = u.String()
		}, []string{password, base64.StdEncoding.EncodeToString([]byte("user:" + password))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusUnauthorized)
				// The credentials straddle the 512 bytes an answer is cut to.
				_, _ = fmt.Fprintf(w, "%s you sent Authorization: %s", strings.Repeat(".", 460), r.Header.Get("Authorization"))
			}))
			defer srv.Close()
			logs := &bytes.Buffer{}
			s := newSink(t, srv.URL, tc.mutate, func(c *loki.Config) {
				c.Attempts = 1
				c.Logger = slog.New(slog.NewTextHandler(logs, nil))
			})
			err := s.Push(t.Context(), batch(2))
			if err == nil {
				t.Fatal("a refused push succeeded")
			}
			for _, text := range []string{err.Error(), logs.String(), s.String(), s.Stats.Rejecting()} {
				for _, leak := range tc.leaks {
					for n := len(leak); n >= 12; n-- {
						if strings.Contains(text, leak[:n]) {
							t.Fatalf("%d characters of a credential leaked into:\n%s", n, text)
						}
					}
				}
			}
		})
	}
}
