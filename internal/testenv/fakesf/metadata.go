package fakesf

import (
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// EventManager answers the Metadata API's readMetadata() call for
// RealTimeEventSettings, the switches of Setup > Event Manager (Metadata
// API Developer Guide: "readMetadata()", "RealTimeEventSettings",
// "SessionHeader", "Error Handling"): POST /services/Soap/m/<version>, a
// SOAP 1.1 envelope with the session (the access token) in
// SessionHeader.sessionId, a SOAPAction header, and faults as HTTP 500
// with faultcode sf:<ExceptionCode>: INVALID_SESSION_ID for a session the
// org did not mint (whatever the Authorization header says: the Metadata
// API reads only SessionHeader), INSUFFICIENT_ACCESS for a user without
// Modify Metadata Through Metadata API Functions or Modify All Data, and
// INVALID_TYPE for a type other than RealTimeEventSettings or an API
// version before 50.0, where the type does not exist. The answer lists
// every entity the test set, storage and streaming, in the order set.
type EventManager struct {
	mu      sync.Mutex
	names   []string
	enabled map[string]bool
	// Forbidden answers INSUFFICIENT_ACCESS.
	Forbidden bool
	expired   []string
	calls     int
}

// Expire makes a session answer INVALID_SESSION_ID, as after its
// timeout.
func (m *EventManager) Expire(session string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expired = append(m.expired, session)
}

// NewEventManager is an Event Manager with these entities switched on.
func NewEventManager(on ...string) *EventManager {
	m := &EventManager{}
	for _, n := range on {
		m.Set(n, true)
	}
	return m
}

// Set switches an entity (LoginEventStream: streaming, LoginEvent:
// storage) on or off.
func (m *EventManager) Set(entity string, on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.enabled == nil {
		m.enabled = map[string]bool{}
	}
	if !slices.Contains(m.names, entity) {
		m.names = append(m.names, entity)
	}
	m.enabled[entity] = on
}

// SetForbidden changes Forbidden while the org serves.
func (m *EventManager) SetForbidden(f bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.Forbidden = f
}

// Calls returns how many readMetadata() calls were answered.
func (m *EventManager) Calls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls
}

// readMetadataRequest is the part of a readMetadata() envelope the fake
// reads.
type readMetadataRequest struct {
	Session string `xml:"Header>SessionHeader>sessionId"`
	Read    *struct {
		Type      string   `xml:"type"`
		FullNames []string `xml:"fullNames"`
	} `xml:"Body>readMetadata"`
}

// serve answers r if it is a Metadata API call, and reports whether it
// was; valid tells the sessions the org minted.
func (m *EventManager) serve(w http.ResponseWriter, r *http.Request, valid func(session string) bool) bool {
	version, ok := strings.CutPrefix(r.URL.Path, "/services/Soap/m/")
	if m == nil || !ok {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	v, err := strconv.ParseFloat(version, 64)
	switch {
	case err != nil || !strings.Contains(version, "."):
		http.NotFound(w, r)
		return true
	case r.Method != http.MethodPost:
		soapFault(w, "soapenv:Client", "Only POST is supported")
		return true
	case r.Header.Get("SOAPAction") == "" && len(r.Header.Values("SOAPAction")) == 0:
		soapFault(w, "soapenv:Client", "No SOAPAction header!")
		return true
	case !strings.HasPrefix(r.Header.Get("Content-Type"), "text/xml"):
		soapFault(w, "soapenv:Client", "Content-Type must be text/xml for SOAP 1.1")
		return true
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	var req readMetadataRequest
	if xml.Unmarshal(body, &req) != nil || req.Read == nil {
		soapFault(w, "soapenv:Client", "Element {http://soap.sforce.com/2006/04/metadata}readMetadata is missing or the envelope is malformed")
		return true
	}
	switch {
	case req.Session == "" || !valid(req.Session) || slices.Contains(m.expired, req.Session):
		soapFault(w, "sf:INVALID_SESSION_ID", "INVALID_SESSION_ID: Invalid Session ID found in SessionHeader: Illegal Session")
		return true
	case m.Forbidden:
		soapFault(w, "sf:INSUFFICIENT_ACCESS", "INSUFFICIENT_ACCESS: use of the Metadata API requires a user with the ModifyAllData or ModifyMetadata permissions")
		return true
	case req.Read.Type != "RealTimeEventSettings" || v < 50.0:
		soapFault(w, "sf:INVALID_TYPE", fmt.Sprintf("INVALID_TYPE: Unknown type name '%s' specified in metadata", req.Read.Type))
		return true
	}
	m.calls++
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" ` +
		`xmlns="http://soap.sforce.com/2006/04/metadata" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><soapenv:Body><readMetadataResponse><result>`)
	for _, fn := range req.Read.FullNames {
		if fn != "RealTimeEvent" {
			b.WriteString(`<records xsi:nil="true"/>`)
			continue
		}
		b.WriteString(`<records xsi:type="RealTimeEventSettings"><fullName>RealTimeEvent</fullName>`)
		for _, n := range m.names {
			fmt.Fprintf(&b, `<realTimeEvents><entityName>%s</entityName><isEnabled>%t</isEnabled></realTimeEvents>`, n, m.enabled[n])
		}
		b.WriteString(`</records>`)
	}
	b.WriteString(`</result></readMetadataResponse></soapenv:Body></soapenv:Envelope>`)
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	_, _ = io.WriteString(w, b.String())
	return true
}

// soapFault writes a SOAP 1.1 fault as Salesforce does: HTTP 500.
func soapFault(w http.ResponseWriter, code, msg string) {
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(http.StatusInternalServerError)
	var esc strings.Builder
	_ = xml.EscapeText(&esc, []byte(msg))
	_, _ = fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" `+
		`xmlns:sf="http://soap.sforce.com/2006/04/metadata"><soapenv:Body><soapenv:Fault><faultcode>%s</faultcode><faultstring>%s</faultstring>`+
		`</soapenv:Fault></soapenv:Body></soapenv:Envelope>`, code, esc.String())
}
