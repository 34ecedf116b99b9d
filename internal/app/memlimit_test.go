package app

import (
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
	limited := fstest.MapFS{"sys/fs/cgroup/memory.max": &fstest.MapFile{Data: []byte("536870912")}}
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	var set []int64
	record := func(n int64) int64 { set = append(set, n); return 0 }

	p := planMemory(env(nil), limited, 300<<20, record)
	if p.Source != "container" || p.Soft != (512<<20)/10*9 || len(set) != 1 || set[0] != p.Soft {
		t.Errorf("a container limit and no GOMEMLIMIT: plan %+v, set %v; want a soft limit of 90%% of 512 MiB", p, set)
	}
	if w := p.warning(); w != "" {
		t.Errorf("512 MiB holds 300 MiB, yet: %s", w)
	}
	if a := p.attrs(); !strings.Contains(a[1].(string), "90% of the container's 512 MiB") {
		t.Errorf("start log attribute %v does not say where the limit came from", a)
	}

	set = nil
	p = planMemory(env(map[string]string{"GOMEMLIMIT": "off"}), limited, 300<<20, record)
	if p.Source != "GOMEMLIMIT" || len(set) != 0 {
		t.Errorf("GOMEMLIMIT set: plan %+v, set %v; the environment must win", p, set)
	}

	p = planMemory(env(nil), fstest.MapFS{}, 300<<20, record)
	if p.Source != "none" || len(set) != 0 || p.warning() != "" {
		t.Errorf("no container limit: plan %+v, set %v", p, set)
	}

	small := fstest.MapFS{"sys/fs/cgroup/memory.max": &fstest.MapFile{Data: []byte("268435456")}}
	p = planMemory(env(nil), small, laneMemoryNeed([]*config.Config{config.Defaults()}), record)
	if w := p.warning(); !strings.Contains(w, "256 MiB is below") || !strings.Contains(w, "queue_bytes") {
		t.Errorf("the defaults in 256 MiB: warning %q, want one naming the limit and queue_bytes", w)
	}
}

// TestLaneMemoryNeed pins the arithmetic docs/operations.md shows: the
// defaults need 2 × 64 MiB + 2 × 16 × 1 MiB, a quarter more, and 80 MiB.
func TestLaneMemoryNeed(t *testing.T) {
	one := config.Defaults()
	if got, want := laneMemoryNeed([]*config.Config{one}), int64(160+40+80)<<20; got != want {
		t.Errorf("one org at the defaults: %d MiB, want %d MiB", got>>20, want>>20)
	}
	if got, want := laneMemoryNeed([]*config.Config{one, one, one}), int64(3*(160+40)+80)<<20; got != want {
		t.Errorf("three orgs: %d MiB, want %d MiB", got>>20, want>>20)
	}
	unbounded := config.Defaults()
	unbounded.Sink.Loki.Batch.QueueBytes = 0
	if got := laneMemoryNeed([]*config.Config{unbounded}); got < 2*10000*(256<<10) {
		t.Errorf("queue_bytes 0 counts every entry at the line cap: got %d MiB", got>>20)
	}
}
