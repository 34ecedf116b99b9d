package pubsub

import (
	"bytes"
	"log/slog"
	"testing"
)

// The older implementation stores pubsub:<topic> as the standard base64
// (with padding) of the replay id's raw bytes, as Salesforce sent them: the
// topic resumes from exactly those bytes, never from the preset.
func TestOlderPubSubCheckpointResumesFromTheReplayID(t *testing.T) {
	s := &Source{spec: Spec{ReplayPreset: Latest}, log: slog.New(slog.DiscardHandler)}
	s.Hooks.GarbageCheckpoint = func(topic string) { t.Errorf("%s: the older value was judged unreadable", topic) }
	for value, want := range map[string][]byte{
		"AAAAAAAAAGQ=":         {0, 0, 0, 0, 0, 0, 0, 0x64},                         // 8 bytes, one pad
		"AAAAAAAHoSA=":         {0, 0, 0, 0, 0, 7, 0xa1, 0x20},                      // a LoginEventStream id
		"AAAAAAAAAAE2Aw==":     {0, 0, 0, 0, 0, 0, 0, 1, 0x36, 0x03},                // 10 bytes, two pads
		"AAAAAAAAAGQAAAAAAGQA": {0, 0, 0, 0, 0, 0, 0, 0x64, 0, 0, 0, 0, 0, 0x64, 0}, // 15 bytes, no pad
	} {
		const topic = "/event/LoginEventStream"
		pos := s.start(topic, func(k string) (string, bool) {
			if k != "pubsub:"+topic {
				t.Fatalf("looked up %q", k)
			}
			return value, true
		})
		if !bytes.Equal(pos.replayID, want) {
			t.Errorf("%s resumes from %x, want %x", value, pos.replayID, want)
		}
	}
}
