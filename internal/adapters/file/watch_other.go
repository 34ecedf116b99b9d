//go:build !linux

package file

import (
	"fmt"
	"runtime"
)

// unwatchable says why a watch on dir would miss writes. Outside Linux
// there is no reliable way here to tell a local filesystem from a network
// one, whose notifications miss other hosts' writes, so the watch is not
// trusted and the standby polls.
func unwatchable(dir string, _ func(string) (uint32, error)) (string, error) {
	return fmt.Sprintf("file notifications are trusted on Linux only, this is %s (the directory %s); "+
		"the standby polls every renew_interval", runtime.GOOS, dir), nil
}
