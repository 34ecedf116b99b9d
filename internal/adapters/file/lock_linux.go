//go:build linux

package file

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// tryLock takes an exclusive open file description (OFD) lock on the whole
// of f without waiting, errLockBusy when another description holds one.
// The lock belongs to f's description, not to the process: two stores in
// one process exclude each other as two processes do, closing f releases
// it, and Linux's NFS client forwards it to the server (NLM or NFSv4).
func tryLock(f *os.File) error {
	lk := unix.Flock_t{Type: unix.F_WRLCK}
	err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk)
	if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
		return errLockBusy
	}
	return err
}
