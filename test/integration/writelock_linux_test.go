package integration

import (
	"os"

	"golang.org/x/sys/unix"
)

// waitWriteLock takes the file adapter's write lock on f, an open file
// description (OFD) lock as the adapter takes on Linux, waiting while a
// writer holds it.
func waitWriteLock(f *os.File) error {
	lk := unix.Flock_t{Type: unix.F_WRLCK}
	return unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLKW, &lk)
}
