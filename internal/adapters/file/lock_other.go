//go:build unix && !linux

package file

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// tryLock takes an exclusive flock(2) lock on f without waiting,
// errLockBusy when another open file holds one. Like Linux's OFD locks it
// belongs to f's open file, not to the process, and closing f releases
// it; macOS keeps flock locks on the host, so replicas on several hosts
// sharing a file over NFS need Linux.
func tryLock(f *os.File) error {
	err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) || errors.Is(err, unix.EAGAIN) {
		return errLockBusy
	}
	return err
}
