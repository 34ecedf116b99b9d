//go:build unix && !linux

package integration

import (
	"os"

	"golang.org/x/sys/unix"
)

// waitWriteLock takes the file adapter's write lock on f, flock(2) as the
// adapter takes outside Linux, waiting while a writer holds it.
func waitWriteLock(f *os.File) error {
	return unix.Flock(int(f.Fd()), unix.LOCK_EX)
}
