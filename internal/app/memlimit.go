package app

import (
	"cmp"
	"fmt"
	"io/fs"
	"math"
	"path"
	"strconv"
	"strings"

	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/domain"
)

// The Go runtime does not read a container's memory limit: without a soft
// limit its heap may grow to twice the live data before a collection
// (GOGC=100), and a replica with both lanes full is killed by the kernel
// long before it would run out of work. The daemon therefore sets the
// runtime's soft limit (GOMEMLIMIT) to softLimitNum/softLimitDen of the
// cgroup's memory limit when the environment does not set GOMEMLIMIT
// itself, and warns when the limit in effect is below what the configured
// lanes need (docs/operations.md, Memory).
const (
	softLimitNum, softLimitDen = 9, 10
	// runtimeBaseBytes is the resident set besides the lanes' data: the
	// mapped binary, the runtime, the clients and their buffers (an idle
	// leader measures about 53 MiB; the rest is headroom).
	runtimeBaseBytes = 80 << 20
	// laneSlotBytes is what a full lane's buffer takes per queue_entries
	// entry: a slot holds the entry and its cost, and the buffer never
	// grows past queue_entries slots.
	laneSlotBytes = 104
	// headroomNum/headroomDen (7/4) is the soft limit needed over the
	// lanes' live data: the collector keeps up with both lanes draining
	// and the resident set stays under the container's limit
	// (docs/operations.md, Memory, measured).
	headroomNum, headroomDen = 7, 4
)

// containerMemoryLimit returns the memory limit of this process's cgroup
// in bytes, 0 when there is none: the smallest limit on the way from its
// cgroup (named in /proc/self/cgroup) to the root of the cgroup file
// system, cgroup v2 (memory.max) or v1 (memory.limit_in_bytes). "max", v1's
// page-rounded MaxInt64 and unreadable files mean no limit.
func containerMemoryLimit(root fs.FS) int64 {
	var v2, v1 string // this process's cgroup paths
	if b, err := fs.ReadFile(root, "proc/self/cgroup"); err == nil {
		for line := range strings.Lines(string(b)) {
			parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
			if len(parts) != 3 {
				continue
			}
			switch {
			case parts[0] == "0" && parts[1] == "":
				v2 = parts[2]
			case strings.Contains(","+parts[1]+",", ",memory,"):
				v1 = parts[2]
			}
		}
	}
	limit := smallestLimit(root, "sys/fs/cgroup", v2, "memory.max")
	if limit == 0 {
		limit = smallestLimit(root, "sys/fs/cgroup/memory", v1, "memory.limit_in_bytes")
	}
	return limit
}

// smallestLimit reads file in dir/cg and every directory above it up to
// dir, returning the smallest limit found (0: none).
func smallestLimit(root fs.FS, dir, cg, file string) int64 {
	var limit int64
	p := path.Clean("/" + cg)
	for {
		if n := readLimit(root, path.Join(dir, p, file)); n > 0 && (limit == 0 || n < limit) {
			limit = n
		}
		if p == "/" {
			return limit
		}
		p = path.Dir(p)
	}
}

func readLimit(root fs.FS, name string) int64 {
	b, err := fs.ReadFile(root, name)
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n <= 0 || n >= 1<<62 {
		return 0
	}
	return n
}

// memoryPlan is what the daemon decided about memory at start.
type memoryPlan struct {
	Container int64  // the cgroup's limit, 0 when none
	Soft      int64  // the soft limit in effect, 0 when none
	Source    string // "GOMEMLIMIT", "container" or "none"
	Need      int64  // the live data the configured lanes may hold when full
}

// planMemory decides the soft limit: GOMEMLIMIT from the environment wins
// (the runtime applied it already, "off" included); otherwise
// softLimitNum/softLimitDen of the container's limit; otherwise none.
// setLimit is debug.SetMemoryLimit (a negative argument reads the limit).
func planMemory(getenv func(string) string, root fs.FS, need int64, setLimit func(int64) int64) memoryPlan {
	p := memoryPlan{Container: containerMemoryLimit(root), Need: need, Source: "none"}
	switch {
	case getenv("GOMEMLIMIT") != "":
		p.Source = "GOMEMLIMIT"
		if l := setLimit(-1); l < math.MaxInt64 {
			p.Soft = l
		}
	case p.Container > 0:
		p.Source, p.Soft = "container", p.Container/softLimitDen*softLimitNum
		setLimit(p.Soft)
	}
	return p
}

// Recommended is the soft limit the lanes need: their live data with the
// collector's headroom, and the runtime.
func (p memoryPlan) Recommended() int64 {
	return (p.Need-runtimeBaseBytes)/headroomDen*headroomNum + runtimeBaseBytes
}

// laneMemoryNeed is the live data the shards' pipelines may hold when every
// lane is full: each lane's queue_bytes (batches in the air count against
// it), each lane's max_in_flight encoded pushes of up to batch.max_bytes,
// a quarter more for the allocator's size classes and the entries' maps,
// each full lane's buffer of queue_entries entries, and the runtime. A
// replica may lead every org after the others fail, so every shard counts.
func laneMemoryNeed(cfgs []*config.Config) int64 {
	var data, slots int64
	for _, cfg := range cfgs {
		rt, bulk := laneConfigs(cfg)
		for _, l := range []*domain.LaneConfig{&rt, &bulk} {
			if l.QueueBytes == 0 { // no byte bound: every entry at the line cap
				l.QueueBytes = int64(l.QueueEntries) * int64(cmp.Or(cfg.Sink.Loki.MaxLineBytes, 256<<10))
			}
			slots += int64(l.QueueEntries) * laneSlotBytes
		}
		inFlight := int64(cfg.Sink.Loki.MaxInFlight) * int64(cfg.Sink.Loki.Batch.MaxBytes)
		data += rt.QueueBytes + bulk.QueueBytes + 2*inFlight
	}
	return data + data/4 + slots + runtimeBaseBytes
}

// warning is what to log when the limit in effect is below what the lanes
// need, or "".
func (p memoryPlan) warning() string {
	limit, what := p.Soft, "the soft memory limit "+mib(p.Soft)
	switch {
	case p.Soft == 0 && p.Container == 0:
		return ""
	case p.Soft == 0:
		limit, what = p.Container, "the container's memory limit "+mib(p.Container)
	case p.Source == "container":
		what += " (90% of the container's " + mib(p.Container) + ")"
	default:
		what += " (GOMEMLIMIT)"
	}
	if limit >= p.Recommended() {
		return ""
	}
	return what + " is below the " + mib(p.Recommended()) + " the lanes need when Loki falls behind (" + mib(p.Need) +
		" of live data: both lanes' queue_bytes and max_in_flight pushes of batch.max_bytes for every org this replica may lead, and the runtime; " +
		"the collector needs 1.75 times the lanes' part): raise the limit to a container of " + mib(p.Recommended()/softLimitNum*softLimitDen) +
		" (GOMEMLIMIT 90% of it), or lower sink.loki.batch.queue_bytes, or the kernel kills the replica when the lanes fill"
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
