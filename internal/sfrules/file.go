package sfrules

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// FileProblem says in words why a file the configuration names could not
// be read, and what to do: it continues "<key> <path> ".
func FileProblem(err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "does not exist: correct the path, or put the file there (a relative path in the configuration file is read from that file's directory)"
	case errors.Is(err, fs.ErrPermission):
		return fmt.Sprintf("cannot be read by this process (uid %d): make it readable by sf2loki's user (chown, or the pod's fsGroup), keeping it unreadable by others", os.Getuid())
	case isDirErr(err):
		return "is a directory, not a file: give the file in it"
	}
	return "cannot be read"
}

// isDirErr reports a read of a directory (EISDIR on Unix).
func isDirErr(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && strings.Contains(pe.Err.Error(), "is a directory")
}
