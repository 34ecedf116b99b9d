package testenv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// KubeOptions extends the test API server StartKube runs.
type KubeOptions struct {
	// Users are more token-authenticated users, each an administrator
	// (system:masters): a test that needs requests told apart gives each
	// client its own user.
	Users []KubeUser
	// Audit writes an audit log (AuditLog): every request of Users, and
	// every request on leases in coordination.k8s.io, at level Metadata.
	Audit bool
}

// KubeUser is a user of the test API server.
type KubeUser struct {
	Name, Token string
}

// tokens is the users' lines of the token file (token,user,uid,groups).
func (o KubeOptions) tokens() string {
	var b strings.Builder
	for i, u := range o.Users {
		fmt.Fprintf(&b, "%s,%s,%d,system:masters\n", u.Token, u.Name, 100+i)
	}
	return b.String()
}

// apiserverArgs writes what the options need into dir and returns the
// API server's extra flags.
func (o KubeOptions) apiserverArgs(t testing.TB, dir string) []string {
	t.Helper()
	if !o.Audit {
		return nil
	}
	// RequestReceived is omitted: a request is logged once it is answered
	// (ResponseComplete), a watch also when its response starts.
	policy := "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n"
	if len(o.Users) > 0 {
		var users []string
		for _, u := range o.Users {
			users = append(users, u.Name)
		}
		names, _ := json.Marshal(users)
		policy += fmt.Sprintf("- level: Metadata\n  users: %s\n", names)
	}
	policy += "- level: Metadata\n  resources: [{group: coordination.k8s.io, resources: [leases]}]\n- level: None\n"
	policyFile := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policyFile, []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"--audit-policy-file", policyFile, "--audit-log-path", filepath.Join(dir, auditLogName),
		"--audit-log-format", "json", "--audit-log-mode", "blocking"}
}

const auditLogName = "audit.log"

// AuditEvent is one line of the audit log (audit.k8s.io/v1 Event), the
// fields level Metadata has that the tests read.
type AuditEvent struct {
	AuditID string `json:"auditID"`
	Stage   string `json:"stage"`
	Verb    string `json:"verb"`
	User    struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource  string `json:"resource"`
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceived time.Time `json:"requestReceivedTimestamp"`
	StageTimestamp  time.Time `json:"stageTimestamp"`
}

// AuditRequest is one request of the audit log: its events (a watch has
// two, ResponseStarted and ResponseComplete) merged.
type AuditRequest struct {
	ID, User, Verb string
	// Name is the object's name ("" for a collection or a non-resource URL).
	Name string
	// Code is the response's status (0 until the request completed).
	Code int
	// Received is when the API server received the request; Completed when
	// it answered in full (zero while a watch is open).
	Received, Completed time.Time
}

// Succeeded reports whether the request completed with a 2xx status.
func (r AuditRequest) Succeeded() bool { return r.Code >= 200 && r.Code < 300 }

// AuditLog reads the test API server's audit log as it grows.
type AuditLog struct {
	path string

	mu      sync.Mutex
	off     int64
	partial []byte
	byID    map[string]*AuditRequest
	order   []*AuditRequest
}

// AuditLog returns a reader of the audit log (KubeOptions.Audit).
func (k *KubeServer) AuditLog() *AuditLog {
	return &AuditLog{path: filepath.Join(k.dir, auditLogName), byID: map[string]*AuditRequest{}}
}

// Requests reads what was appended since the last call and returns every
// request logged so far, in the order their first event was written.
func (a *AuditLog) Requests() ([]AuditRequest, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.read(); err != nil {
		return nil, err
	}
	out := make([]AuditRequest, len(a.order))
	for i, r := range a.order {
		out[i] = *r
	}
	return out, nil
}

func (a *AuditLog) read() error {
	f, err := os.Open(a.path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Seek(a.off, io.SeekStart); err != nil {
		return err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	a.off += int64(len(data))
	data = append(a.partial, data...)
	end := bytes.LastIndexByte(data, '\n') + 1
	a.partial = slices.Clone(data[end:])
	for line := range bytes.Lines(data[:end]) {
		var ev AuditEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			return fmt.Errorf("audit log: %w: %s", err, line)
		}
		a.add(ev)
	}
	return nil
}

func (a *AuditLog) add(ev AuditEvent) {
	r := a.byID[ev.AuditID]
	if r == nil {
		r = &AuditRequest{ID: ev.AuditID, User: ev.User.Username, Verb: ev.Verb, Received: ev.RequestReceived}
		if ev.ObjectRef != nil {
			r.Name = ev.ObjectRef.Name
		}
		a.byID[ev.AuditID] = r
		a.order = append(a.order, r)
	}
	if ev.Stage == "ResponseComplete" || ev.Stage == "Panic" {
		r.Completed = ev.StageTimestamp
		if ev.ResponseStatus != nil {
			r.Code = ev.ResponseStatus.Code
		}
	}
}
