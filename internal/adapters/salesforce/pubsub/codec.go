package pubsub

import (
	"unicode/utf8"
	"unsafe"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce/pubsub/eventbus"
)

// fetchCodec is the Subscribe stream's codec: requests are marshalled as
// protobuf does, and a FetchResponse is read in one pass over one copy of
// the message, its events allocated together, the replay ids, payloads
// and strings aliasing that copy (which nothing writes to, and nothing
// reuses: it lives as long as any of them is referenced). What proto
// would read otherwise (unknown fields, a field of an unexpected wire
// type, a message field given twice, invalid UTF-8, a malformed message)
// is left to proto.Unmarshal on the same bytes, so a response reads
// exactly as proto reads it, errors included.
type fetchCodec struct{}

// protoCodec is gRPC's protobuf codec, for everything but a FetchResponse.
var protoCodec = encoding.GetCodecV2("proto")

// Name is empty so that the call keeps the content-type it has without a
// forced codec (application/grpc), rather than naming a subtype.
func (fetchCodec) Name() string { return "" }

func (fetchCodec) Marshal(v any) (mem.BufferSlice, error) { return protoCodec.Marshal(v) }

func (fetchCodec) Unmarshal(data mem.BufferSlice, v any) error {
	resp, ok := v.(*eventbus.FetchResponse)
	if !ok {
		return protoCodec.Unmarshal(data, v)
	}
	return unmarshalFetchResponse(data.Materialize(), resp)
}

// unmarshalFetchResponse is proto.Unmarshal(b, resp), with resp's bytes
// and strings aliasing b: b must never be written to again.
func unmarshalFetchResponse(b []byte, resp *eventbus.FetchResponse) error {
	resp.Reset()
	if readFetchResponse(b, resp) {
		return nil
	}
	resp.Reset()
	return proto.Unmarshal(b, resp)
}

// readFetchResponse reads the fields of a FetchResponse as proto does; false
// when b has what it leaves to proto.
func readFetchResponse(b []byte, resp *eventbus.FetchResponse) bool {
	n, ok := countEvents(b)
	if !ok {
		return false
	}
	var events []eventbus.ConsumerEvent
	var producers []eventbus.ProducerEvent
	if n > 0 {
		events, producers = make([]eventbus.ConsumerEvent, n), make([]eventbus.ProducerEvent, n)
		resp.Events = make([]*eventbus.ConsumerEvent, 0, n)
	}
	for len(b) > 0 {
		num, typ, v, rest, ok := next(b)
		if !ok {
			return false
		}
		b = rest
		switch {
		case num == 1 && typ == protowire.BytesType:
			ev := &events[len(resp.Events)]
			if !readConsumerEvent(v, ev, &producers[len(resp.Events)]) {
				return false
			}
			resp.Events = append(resp.Events, ev)
		case num == 2 && typ == protowire.BytesType:
			resp.LatestReplayId = alias(v)
		case num == 3 && typ == protowire.BytesType:
			s, ok := text(v)
			if !ok {
				return false
			}
			resp.RpcId = s
		case num == 4 && typ == protowire.VarintType:
			x, n := protowire.ConsumeVarint(v)
			if n < 0 {
				return false
			}
			resp.PendingNumRequested = int32(x) //nolint:gosec // proto truncates an int32 so
		default:
			return false // an unknown field, or a known one of another wire type
		}
	}
	return true
}

// countEvents counts a FetchResponse's events: its field 1 of the bytes
// wire type.
func countEvents(b []byte) (int, bool) {
	n := 0
	for len(b) > 0 {
		num, typ, _, rest, ok := next(b)
		if !ok {
			return 0, false
		}
		if num == 1 && typ == protowire.BytesType {
			n++
		}
		b = rest
	}
	return n, true
}

func readConsumerEvent(b []byte, ev *eventbus.ConsumerEvent, pe *eventbus.ProducerEvent) bool {
	for len(b) > 0 {
		num, typ, v, rest, ok := next(b)
		if !ok {
			return false
		}
		b = rest
		switch {
		case num == 1 && typ == protowire.BytesType:
			if ev.Event != nil {
				return false // proto merges a second one into the first
			}
			if !readProducerEvent(v, pe) {
				return false
			}
			ev.Event = pe
		case num == 2 && typ == protowire.BytesType:
			ev.ReplayId = alias(v)
		default:
			return false
		}
	}
	return true
}

func readProducerEvent(b []byte, pe *eventbus.ProducerEvent) bool {
	for len(b) > 0 {
		num, typ, v, rest, ok := next(b)
		if !ok {
			return false
		}
		b = rest
		if typ != protowire.BytesType {
			return false
		}
		switch num {
		case 1, 2:
			s, ok := text(v)
			if !ok {
				return false
			}
			if num == 1 {
				pe.Id = s
			} else {
				pe.SchemaId = s
			}
		case 3:
			pe.Payload = alias(v)
		case 4:
			h := &eventbus.EventHeader{}
			if !readEventHeader(v, h) {
				return false
			}
			pe.Headers = append(pe.Headers, h)
		default:
			return false
		}
	}
	return true
}

func readEventHeader(b []byte, h *eventbus.EventHeader) bool {
	for len(b) > 0 {
		num, typ, v, rest, ok := next(b)
		if !ok || typ != protowire.BytesType {
			return false
		}
		b = rest
		switch num {
		case 1:
			s, ok := text(v)
			if !ok {
				return false
			}
			h.Key = s
		case 2:
			h.Value = alias(v)
		default:
			return false
		}
	}
	return true
}

// next reads one field: its number, its wire type, and the value (a
// bytes field's contents, a varint's bytes); false on anything but a
// well-formed varint or bytes field (groups and fixed-width fields are
// never known fields here: proto reads those).
func next(b []byte) (num protowire.Number, typ protowire.Type, v, rest []byte, ok bool) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 {
		return 0, 0, nil, nil, false
	}
	b = b[n:]
	switch typ {
	case protowire.BytesType:
		v, n = protowire.ConsumeBytes(b)
	case protowire.VarintType:
		_, n = protowire.ConsumeVarint(b)
		v = b[:max(n, 0)]
	default:
		return 0, 0, nil, nil, false
	}
	if n < 0 {
		return 0, 0, nil, nil, false
	}
	return num, typ, v, b[n:], true
}

// alias is a bytes field as proto sets it (nil when empty), aliasing the
// message, capped so that an append never writes into it.
func alias(v []byte) []byte {
	if len(v) == 0 {
		return nil
	}
	return v[:len(v):len(v)]
}

// text is a string field aliasing the message (never written to); false
// when it is not UTF-8, which proto refuses.
func text(v []byte) (string, bool) {
	if !utf8.Valid(v) {
		return "", false
	}
	return unsafe.String(unsafe.SliceData(v), len(v)), true
}
