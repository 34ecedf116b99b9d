package app

import (
	"math"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/sf2loki/sf2loki/internal/config"
)

func TestContainerMemoryLimit(t *testing.T) {
	for name, tc := range map[string]struct {
		files map[string]string
		want  int64
	}{
		"cgroup v2 limit":     {map[string]string{"sys/fs/cgroup/memory.max": "536870912\n"}, 512 << 20},
		"cgroup v2 unlimited": {map[string]string{"sys/fs/cgroup/memory.max": "max\n"}, 0},
		"cgroup v1 limit":     {map[string]string{"sys/fs/cgroup/memory/memory.limit_in_bytes": "268435456\n"}, 256 << 20},
		"cgroup v1 unlimited": {map[string]string{"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"}, 0},
		"no cgroup":           {map[string]string{}, 0},
		"garbage":             {map[string]string{"sys/fs/cgroup/memory.max": "lots"}, 0},
		"v2 wins over v1":     {map[string]string{"sys/fs/cgroup/memory.max": "1073741824", "sys/fs/cgroup/memory/memory.limit_in_bytes": "1"}, 1 << 30},
		// A cgroup namespace of the host (systemd MemoryMax=, --cgroupns=host):
		// the limit is on this process's cgroup, or on a parent of it.
		"v2 own cgroup": {map[string]string{"proc/self/cgroup": "0::/system.slice/sf2loki.service\n",
			"sys/fs/cgroup/memory.max": "max", "sys/fs/cgroup/system.slice/sf2loki.service/memory.max": "402653184\n"}, 384 << 20},
		"v2 parent's limit is smaller": {map[string]string{"proc/self/cgroup": "0::/kubepods/pod1/ctr\n",
			"sys/fs/cgroup/kubepods/pod1/ctr/memory.max": "max", "sys/fs/cgroup/kubepods/pod1/memory.max": "536870912"}, 512 << 20},
		"v1 own cgroup": {map[string]string{"proc/self/cgroup": "12:pids:/x\n4:memory:/docker/abc\n1:name=systemd:/docker/abc\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712", "sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "268435456"}, 256 << 20},
	} {
		fsys := fstest.MapFS{}
		for p, data := range tc.files {
			fsys[p] = &fstest.MapFile{Data: []byte(data)}
		}
		if got := containerMemoryLimit(fsys); got != tc.want {
			t.Errorf("%s: limit %d, want %d", name, got, tc.want)
		}
	}
}

func TestPlanMemory(t *testing.T) {
	cgroup := func(limit string) fstest.MapFS {
		return fstest.MapFS{"sys/fs/cgroup/memory.max": &fstest.MapFile{Data: []byte(limit)}}
	}
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	var set []int64
	current := int64(math.MaxInt64)
	limit := func(n int64) int64 {
		if n < 0 {
			return current
		}
		set = append(set, n)
		return 0
	}
	defaults := laneMemoryNeed([]*config.Config{config.Defaults()})

	p := planMemory(env(nil), cgroup("536870912"), defaults, limit)
	if p.Source != "container" || p.Soft != (512<<20)/10*9 || len(set) != 1 || set[0] != p.Soft {
		t.Errorf("a container limit and no GOMEMLIMIT: plan %+v, set %v; want a soft limit of 90%% of 512 MiB", p, set)
	}
	if w := p.warning(); w != "" {
		t.Errorf("512 MiB fits one org at the defaults, yet: %s", w)
	}
	if a := p.attrs(); !strings.Contains(a[1].(string), "90% of the container's 512 MiB") {
		t.Errorf("start log attribute %v does not say where the limit came from", a)
	}

	// 300 MiB holds the live data but not the collector's headroom
	// (measured: 346 MiB peaks under a 300 MiB soft limit).
	if w := planMemory(env(nil), cgroup("314572800"), defaults, limit).warning(); !strings.Contains(w, "the soft memory limit 270 MiB (90% of the container's 300 MiB) is below") ||
		!strings.Contains(w, "queue_bytes") {
		t.Errorf("the defaults in 300 MiB: warning %q", w)
	}

	set, current = nil, 460<<20
	p = planMemory(env(map[string]string{"GOMEMLIMIT": "460MiB"}), cgroup("2147483648"), defaults, limit)
	if p.Source != "GOMEMLIMIT" || len(set) != 0 || p.Soft != 460<<20 || p.warning() != "" {
		t.Errorf("GOMEMLIMIT set: plan %+v, set %v, warning %q; the environment must win", p, set, p.warning())
	}
	// Three orgs under the same GOMEMLIMIT: the limit someone forgot to
	// raise with the task's memory.
	three := laneMemoryNeed([]*config.Config{config.Defaults(), config.Defaults(), config.Defaults()})
	if w := planMemory(env(map[string]string{"GOMEMLIMIT": "460MiB"}), cgroup("2147483648"), three, limit).warning(); !strings.Contains(w, "460 MiB (GOMEMLIMIT) is below") {
		t.Errorf("three orgs under GOMEMLIMIT=460MiB: warning %q", w)
	}

	current = math.MaxInt64
	p = planMemory(env(map[string]string{"GOMEMLIMIT": "off"}), cgroup("max"), defaults, limit)
	if p.Soft != 0 || p.warning() != "" {
		t.Errorf("GOMEMLIMIT=off without a container limit: plan %+v", p)
	}
	p = planMemory(env(nil), fstest.MapFS{}, defaults, limit)
	if p.Source != "none" || p.warning() != "" {
		t.Errorf("no container limit: plan %+v", p)
	}
}

// TestLaneMemoryNeed pins the arithmetic docs/operations.md shows: the
// defaults hold 2 × 64 MiB + 2 × 16 × 1 MiB, a quarter more, the lanes'
// 2 × 10,000 slots of 104 bytes, and 80 MiB.
func TestLaneMemoryNeed(t *testing.T) {
	one := config.Defaults()
	if got, want := laneMemoryNeed([]*config.Config{one}), int64(160+40+80)<<20+2*10000*laneSlotBytes; got != want {
		t.Errorf("one org at the defaults: %d, want %d", got, want)
	}
	if got, want := laneMemoryNeed([]*config.Config{one, one, one}), int64(3*(160+40)+80)<<20+6*10000*laneSlotBytes; got != want {
		t.Errorf("three orgs: %d, want %d", got, want)
	}
	unbounded := config.Defaults()
	unbounded.Sink.Loki.Batch.QueueBytes = 0
	if got := laneMemoryNeed([]*config.Config{unbounded}); got < 2*10000*(256<<10) {
		t.Errorf("queue_bytes 0 counts every entry at the line cap: got %d MiB", got>>20)
	}
	many := config.Defaults()
	many.Sink.Loki.Batch.QueueEntries = 1_000_000
	if got := laneMemoryNeed([]*config.Config{many}) - laneMemoryNeed([]*config.Config{one}); got != 2*990_000*laneSlotBytes {
		t.Errorf("a million entries a lane add %d bytes of slots, want %d", got, 2*990_000*laneSlotBytes)
	}
}
