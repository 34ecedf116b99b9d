package testenv_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sf2loki/sf2loki/internal/testenv"
)

// The binary Sf2loki builds is removed with its directory.
func TestRemoveSf2lokiLeavesNothing(t *testing.T) {
	bin := testenv.Sf2loki(t)
	if _, err := os.Stat(bin); err != nil {
		t.Fatal(err)
	}
	if err := testenv.RemoveSf2loki(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(bin)); !os.IsNotExist(err) {
		t.Fatalf("%s is still there: %v", filepath.Dir(bin), err)
	}
	// Asked again, it builds again.
	again := testenv.Sf2loki(t)
	if _, err := os.Stat(again); err != nil {
		t.Fatalf("after the removal: %v", err)
	}
	if err := testenv.RemoveSf2loki(); err != nil {
		t.Fatal(err)
	}
}
