package backfill

import "time"

// Doc is the backfill state document, for the tests of package backfill_test
// (which run the command through the whole command line).
type Doc = backfillDoc

// SetWaits sets the waits between a file's or a push's tries and returns
// what puts them back.
func SetWaits(file, push time.Duration) (restore func()) {
	fileWait, pushWait := backfillFileWait, backfillPushWait
	backfillFileWait, backfillPushWait = file, push
	return func() { backfillFileWait, backfillPushWait = fileWait, pushWait }
}
