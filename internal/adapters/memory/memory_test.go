package memory_test

import (
	"testing"

	"github.com/sf2loki/sf2loki/internal/adapters/memory"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
)

// TestContract: the store honours the ObjectCAS contract (every handle on
// an object is the object itself).
func TestContract(t *testing.T) {
	porttest.RunObjectCAS(t, func(t *testing.T) porttest.Opener {
		s := memory.New(t.Name())
		return func(*testing.T) ports.ObjectCAS { return s }
	})
}
