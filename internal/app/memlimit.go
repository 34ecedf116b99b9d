package app

import (
	"cmp"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/domain"
)

// The Go runtime does not read a container's memory limit: without a soft
// limit its heap may grow to twice the live data before a collection
// (GOGC=100), and a replica with both lanes full is killed by the kernel
// long before it would run out of work. The daemon therefore sets the
// runtime's soft limit (GOMEMLIMIT) to softLimitShare of the cgroup's
// memory limit when the environment does not set GOMEMLIMIT itself.
const (
	softLimitNum, softLimitDen = 9, 10
	// runtimeBaseBytes is the resident set besides the lanes' data: the
	// mapped binary, the runtime, the clients and their buffers (an idle
	// leader measures about 53 MiB; the rest is headroom).
	runtimeBaseBytes = 80 << 20
)

// cgroup limit files, relative to the root file system: v2 first, then v1.
var cgroupLimitFiles = []string{"sys/fs/cgroup/memory.max", "sys/fs/cgroup/memory/memory.limit_in_bytes"}

// containerMemoryLimit returns the cgroup's memory limit in bytes, 0 when
// there is none (no cgroup file, "max", or v1's page-rounded MaxInt64).
func containerMemoryLimit(root fs.FS) int64 {
	for _, name := range cgroupLimitFiles {
		b, err := fs.ReadFile(root, name)
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return 0
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 || n >= 1<<62 {
			return 0
		}
		return n
	}
	return 0
}

// memoryPlan is what the daemon decided about memory at start.
type memoryPlan struct {
	Container int64  // the cgroup's limit, 0 when none
	Soft      int64  // the soft limit set, 0 when none was set here
	Source    string // "GOMEMLIMIT", "container" or "none"
	Need      int64  // what the configured lanes may hold when full, with headroom
}

// planMemory decides the soft limit: GOMEMLIMIT from the environment wins
// (the runtime applied it already, "off" included); otherwise
// softLimitNum/softLimitDen of the container's limit; otherwise none. set
// is debug.SetMemoryLimit.
func planMemory(getenv func(string) string, root fs.FS, need int64, set func(int64) int64) memoryPlan {
	p := memoryPlan{Container: containerMemoryLimit(root), Need: need, Source: "none"}
	switch {
	case getenv("GOMEMLIMIT") != "":
		p.Source = "GOMEMLIMIT"
	case p.Container > 0:
		p.Source, p.Soft = "container", p.Container/softLimitDen*softLimitNum
		set(p.Soft)
	}
	return p
}

// laneMemoryNeed is the memory shards' pipelines may hold when every lane
// is full: each lane's queue_bytes (batches in the air count against it),
// plus each lane's max_in_flight encoded pushes of up to batch.max_bytes,
// with a quarter for the allocator's and the maps' overhead, plus the
// runtime. A replica may lead every org after the others fail, so every
// shard counts.
func laneMemoryNeed(cfgs []*config.Config) int64 {
	var data int64
	for _, cfg := range cfgs {
		rt, bulk := laneConfigs(cfg)
		for _, l := range []*domain.LaneConfig{&rt, &bulk} {
			if l.QueueBytes == 0 { // no byte bound: every entry at the line cap
				l.QueueBytes = int64(l.QueueEntries) * int64(cmp.Or(cfg.Sink.Loki.MaxLineBytes, 256<<10))
			}
		}
		inFlight := int64(cfg.Sink.Loki.MaxInFlight) * int64(cfg.Sink.Loki.Batch.MaxBytes)
		data += rt.QueueBytes + bulk.QueueBytes + 2*inFlight
	}
	return data + data/4 + runtimeBaseBytes
}

// warning is what to log when the container's limit is below what the
// lanes may hold, or "".
func (p memoryPlan) warning() string {
	if p.Container == 0 || p.Container >= p.Need {
		return ""
	}
	return "the container's memory limit " + mib(p.Container) + " is below the " + mib(p.Need) +
		" the lanes may hold when Loki falls behind (both lanes' queue_bytes and max_in_flight pushes of batch.max_bytes, for every org this replica may lead, plus the runtime): " +
		"raise the limit (512 MiB fits the defaults for one org) or lower sink.loki.batch.queue_bytes, or the kernel kills the replica when the lanes fill"
}

// attrs are the start log's attributes for p.
func (p memoryPlan) attrs() []any {
	switch p.Source {
	case "GOMEMLIMIT":
		return []any{"memory_limit", "GOMEMLIMIT from the environment"}
	case "container":
		return []any{"memory_limit", mib(p.Soft) + " (90% of the container's " + mib(p.Container) + ")"}
	}
	return []any{"memory_limit", "none (no container memory limit found; GOMEMLIMIT unset)"}
}

// mib formats n bytes in MiB, as container limits are written.
func mib(n int64) string { return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20)) }
