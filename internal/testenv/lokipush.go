package testenv

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"net/http"
)

// LokiStream is one stream of a Loki JSON push: its labels and its
// [timestamp, line] values.
type LokiStream struct {
	Stream map[string]string `json:"stream"`
	Values [][]any           `json:"values"`
}

// DecodeLokiPush reads a gzipped JSON push body (the sink's encoding, as
// Loki's /loki/api/v1/push accepts it).
func DecodeLokiPush(r *http.Request) ([]LokiStream, error) {
	zr, err := gzip.NewReader(r.Body)
	if err != nil {
		return nil, fmt.Errorf("push body is not gzip: %w", err)
	}
	var body struct {
		Streams []LokiStream `json:"streams"`
	}
	if err := json.NewDecoder(zr).Decode(&body); err != nil {
		return nil, fmt.Errorf("push body is not Loki JSON: %w", err)
	}
	return body.Streams, nil
}
