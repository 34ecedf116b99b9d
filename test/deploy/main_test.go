package deploy

import (
	"testing"

	"github.com/sf2loki/sf2loki/internal/testenv"
)

// TestMain removes the sf2loki binary the tests built (about 100 MB in
// the temp dir per run).
func TestMain(m *testing.M) { testenv.Main(m) }
