package k8s

import (
	"context"

	"github.com/sf2loki/sf2loki/internal/ports"
)

// WatchFrom is Watch resuming from resourceVersion rv, with no initial GET.
func (s *Store) WatchFrom(ctx context.Context, rv string) <-chan ports.Change {
	return s.watchFrom(ctx, rv)
}
