package file

import "github.com/fsnotify/fsnotify"

// SetFilesystemType makes s's watches take f's answer for the statfs(2)
// f_type of the file's directory.
func SetFilesystemType(s *Store, f func(dir string) (uint32, error)) { s.hooks.fsType = f }

// SetNotifier makes s's watches make their inotify watcher with f.
func SetNotifier(s *Store, f func() (*fsnotify.Watcher, error)) { s.hooks.newNotifier = f }

// WatchRetryMin is the first backoff after a watch failed to start.
const WatchRetryMin = watchRetryMin
