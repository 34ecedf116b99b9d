package deploy

import (
	"fmt"
	"os"
	"testing"

	"github.com/sf2loki/sf2loki/internal/testenv"
)

// TestMain removes the sf2loki binary the tests built (about 100 MB in
// the temp dir per run).
func TestMain(m *testing.M) {
	code := m.Run()
	if err := testenv.RemoveSf2loki(); err != nil {
		fmt.Fprintln(os.Stderr, "removing the built sf2loki:", err)
	}
	os.Exit(code)
}
