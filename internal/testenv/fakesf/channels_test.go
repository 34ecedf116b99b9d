package fakesf_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
)

// The fake answers the channel objects as the Tooling API does: with a
// session the org minted, over their documented fields only, refusing
// FullName and Metadata in a query of more than one row.
func TestChannelsAreAsStrictAsTheToolingAPI(t *testing.T) {
	ch := &fakesf.Channels{}
	id := ch.AddChannel("Sales__chn", "data")
	ch.AddMember("ChangeEvents", "AccountChangeEvent")
	ch.AddMember("Sales__chn", "AccountChangeEvent")
	ch.AddMember("Sales__chn", "ContactChangeEvent")
	srv := httptest.NewServer(&fakesf.Org{Channels: ch})
	defer srv.Close()
	resp, err := http.PostForm(srv.URL+"/services/oauth2/token", url.Values{"grant_type": {"client_credentials"}, "client_id": {"ck"}, "client_secret": {"x"}})
	if err != nil {
		t.Fatal(err)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&tok)
	_ = resp.Body.Close()
	tooling := func(session, q string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/services/data/v60.0/tooling/query?"+url.Values{"q": {q}}.Encode(), nil)
		req.Header.Set("Authorization", "Bearer "+session)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		q    string
		code string // "" for an answer
	}{
		{"SELECT Id, DeveloperName, NamespacePrefix FROM PlatformEventChannel", ""},
		{"SELECT DeveloperName, EventChannel, SelectedEntity FROM PlatformEventChannelMember", ""},
		{"SELECT SelectedEntity FROM PlatformEventChannelMember WHERE EventChannel = 'ChangeEvents'", ""},
		{"SELECT FullName, SelectedEntity FROM PlatformEventChannelMember", "MALFORMED_QUERY"},
		{"SELECT Metadata FROM PlatformEventChannelMember WHERE EventChannel = 'Sales__chn'", "MALFORMED_QUERY"},
		{"SELECT FullName FROM PlatformEventChannelMember WHERE EventChannel = 'ChangeEvents'", ""}, // one row
		{"SELECT FullName FROM PlatformEventChannel", ""},                                           // one channel
		{"SELECT Entity FROM PlatformEventChannelMember", "INVALID_FIELD"},
		{"SELECT Id FROM PlatformEventChannelMember WHERE EventChannel = ChangeEvents", "MALFORMED_QUERY"},
		{"SELECT Id FROM PlatformChannel", "INVALID_TYPE"},
	} {
		status, body := tooling(tok.AccessToken, tc.q)
		switch {
		case tc.code == "" && status != http.StatusOK:
			t.Errorf("%s: %d %s", tc.q, status, body)
		case tc.code != "" && (status != http.StatusBadRequest || !strings.Contains(body, `"errorCode":"`+tc.code+`"`)):
			t.Errorf("%s: want %s, got %d %s", tc.q, tc.code, status, body)
		}
	}
	if _, body := tooling(tok.AccessToken, "SELECT FullName FROM PlatformEventChannelMember"); !strings.Contains(body,
		"When retrieving results with Metadata or FullName fields, the query qualifications must specify no more than one row for retrieval. Result size: 3") {
		t.Errorf("FullName over three members: %s", body)
	}
	if status, body := tooling("forged", "SELECT Id FROM PlatformEventChannel"); status != http.StatusUnauthorized || !strings.Contains(body, "INVALID_SESSION_ID") {
		t.Errorf("a session the org did not mint: %d %s", status, body)
	}
	_, body := tooling(tok.AccessToken, "SELECT EventChannel, SelectedEntity FROM PlatformEventChannelMember WHERE EventChannel = 'Sales__chn'")
	if !strings.Contains(body, `"totalSize":2`) || !strings.Contains(body, `"SelectedEntity":"ContactChangeEvent"`) || strings.Contains(body, "DeveloperName") {
		t.Errorf("members of Sales__chn: %s", body)
	}
	ch.EventChannelIDs = true
	if _, body := tooling(tok.AccessToken, "SELECT EventChannel FROM PlatformEventChannelMember WHERE EventChannel = '"+id+"'"); !strings.Contains(body, `"totalSize":2`) {
		t.Errorf("members by the channel's Id: %s", body)
	}
	ch.SetForbidden(true)
	if status, body := tooling(tok.AccessToken, "SELECT Id FROM PlatformEventChannelMember"); status != http.StatusBadRequest || !strings.Contains(body, "INVALID_TYPE") {
		t.Errorf("without View Setup and Configuration: %d %s", status, body)
	}
}
