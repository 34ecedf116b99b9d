package salesforce

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/sfrules"
)

// Event Manager (Setup > Event Manager) turns storage and streaming on or
// off for each Real-Time Event Monitoring event. Its switches are the
// Metadata API's RealTimeEventSettings (API 50.0 and later): one
// realTimeEvents entry per storage or streaming entity (LoginEvent,
// LoginEventStream), with isEnabled
// (https://developer.salesforce.com/docs/atlas.en-us.api_meta.meta/api_meta/meta_realtimeeventsettings.htm).
// They are read with the Metadata API's readMetadata() call
// (https://developer.salesforce.com/docs/atlas.en-us.api_meta.meta/api_meta/meta_readMetadata.htm),
// a SOAP call that needs Modify Metadata Through Metadata API Functions or
// Modify All Data. A settings type's component name is its type name
// without "Settings" (meta_settings.htm): RealTimeEvent.

// RealTimeEventSettingsSince is the first API version with
// RealTimeEventSettings.
const RealTimeEventSettingsSince = 50.0

// SOAPFault is a SOAP fault of the Metadata API: Code is the exception code
// without its "sf:" prefix (INVALID_SESSION_ID, INSUFFICIENT_ACCESS,
// INVALID_TYPE), Message the faultstring.
type SOAPFault struct {
	Code, Message string
}

func (f *SOAPFault) Error() string {
	return fmt.Sprintf("salesforce: the Metadata API answered a fault: %s (%s)", f.Code, f.Message)
}

// ErrNoMetadataAccess is a readMetadata() the user may not make: it needs
// Modify Metadata Through Metadata API Functions or Modify All Data.
var ErrNoMetadataAccess = errors.New("salesforce: reading Event Manager's settings (Metadata API readMetadata of RealTimeEventSettings) " +
	"needs the permission Modify Metadata Through Metadata API Functions or Modify All Data")

// RealTimeEventSwitches reads Event Manager's switches: isEnabled by entity
// name (LoginEventStream: streaming, LoginEvent: storage). An entity the
// answer does not list is missing from the map. A user without the
// permission gets an error wrapping ErrNoMetadataAccess (and the fault).
func RealTimeEventSwitches(ctx context.Context, auth *Auth, apiVersion string) (map[string]bool, error) {
	if v, err := strconv.ParseFloat(apiVersion, 64); err != nil || v < RealTimeEventSettingsSince {
		return nil, fmt.Errorf("salesforce: RealTimeEventSettings needs API version %.1f or later, and salesforce.api_version is %q", RealTimeEventSettingsSince, apiVersion)
	}
	path := "/services/Soap/m/" + apiVersion
	for attempt := 1; ; attempt++ {
		var used *Token
		resp, err := auth.Do(ctx, func(tok *Token) (*http.Request, error) {
			used = tok
			req, err := http.NewRequest(http.MethodPost, tok.InstanceURL+path, bytes.NewReader(readSettingsRequest(tok.AccessToken)))
			if err != nil {
				return nil, err
			}
			req.Header.Set("Content-Type", "text/xml; charset=UTF-8")
			req.Header.Set("SOAPAction", `""`)
			return req, nil
		})
		if err != nil {
			return nil, err
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
		_ = resp.Body.Close()
		if err != nil {
			return nil, ports.Transient("readMetadata", fmt.Errorf("salesforce: reading the answer of %s: %w", path, err))
		}
		var env soapEnvelope
		if xerr := xml.Unmarshal(body, &env); xerr != nil || (env.Body.Fault == nil && env.Body.Read == nil) {
			return nil, fmt.Errorf("salesforce: %s answered %d with no readMetadata result: %s", path, resp.StatusCode, auth.snippet(body))
		}
		if f := env.Body.Fault; f != nil {
			code := strings.TrimSpace(f.Code)
			if i := strings.LastIndexByte(code, ':'); i >= 0 {
				code = code[i+1:]
			}
			fault := &SOAPFault{Code: code, Message: auth.Redact(strings.TrimSpace(f.String))}
			switch code {
			case "INVALID_SESSION_ID":
				if attempt == 1 { // the session expired: once more with a new token
					auth.Invalidate(used)
					continue
				}
			case "INSUFFICIENT_ACCESS":
				return nil, fmt.Errorf("%w: %w", ErrNoMetadataAccess, fault)
			}
			return nil, fault
		}
		out := map[string]bool{}
		for _, rec := range env.Body.Read.Records {
			for _, e := range rec.Events {
				on, err := strconv.ParseBool(strings.TrimSpace(e.Enabled))
				if name := strings.TrimSpace(e.Entity); err == nil && name != "" {
					out[name] = on
				}
			}
		}
		return out, nil
	}
}

// readSettingsRequest is the readMetadata() call for the RealTimeEvent
// settings, the session in SessionHeader.
func readSettingsRequest(session string) []byte {
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` +
		`<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:met="http://soap.sforce.com/2006/04/metadata">` +
		`<soapenv:Header><met:SessionHeader><met:sessionId>`)
	_ = xml.EscapeText(&b, []byte(session))
	b.WriteString(`</met:sessionId></met:SessionHeader></soapenv:Header>` +
		`<soapenv:Body><met:readMetadata><met:type>RealTimeEventSettings</met:type><met:fullNames>RealTimeEvent</met:fullNames></met:readMetadata></soapenv:Body>` +
		`</soapenv:Envelope>`)
	return b.Bytes()
}

// soapEnvelope is a readMetadata() answer (names matched in any namespace).
type soapEnvelope struct {
	Body struct {
		Fault *struct {
			Code   string `xml:"faultcode"`
			String string `xml:"faultstring"`
		} `xml:"Fault"`
		Read *struct {
			Records []struct {
				FullName string `xml:"fullName"`
				Events   []struct {
					Entity  string `xml:"entityName"`
					Enabled string `xml:"isEnabled"`
				} `xml:"realTimeEvents"`
			} `xml:"result>records"`
		} `xml:"readMetadataResponse"`
	} `xml:"Body"`
}

// NewestStored returns the EventDate of the newest row of a Real-Time
// Event Monitoring storage object at or after from and before to, both cut
// to the whole second (the literals a big object's index takes); false when
// there is none. The query is legal on a big object: one range on EventDate,
// the leading field of the index, ordered along it.
func NewestStored(ctx context.Context, auth *Auth, apiVersion, object string, from, to time.Time) (time.Time, bool, error) {
	if !sfrules.ValidName(object) {
		return time.Time{}, false, fmt.Errorf("salesforce: %q is not an object name", object)
	}
	rows, err := Query(ctx, auth, apiVersion, fmt.Sprintf("SELECT EventDate FROM %s WHERE EventDate >= %s AND EventDate < %s ORDER BY EventDate DESC LIMIT 1",
		object, literal(from.Truncate(time.Second)), literal(to.Truncate(time.Second))))
	if err != nil || len(rows) == 0 {
		return time.Time{}, false, err
	}
	s, _ := rows[0]["EventDate"].(string)
	t, err := ParseTime(s)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("salesforce: %s answered an EventDate that is not a dateTime (%q): %w", object, s, err)
	}
	return t, true, nil
}
