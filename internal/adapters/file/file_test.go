package file_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/file"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
)

func open(t *testing.T, path string) *file.Store {
	t.Helper()
	s, err := file.New(file.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestContract(t *testing.T) {
	porttest.RunObjectCAS(t, func(t *testing.T) porttest.Opener {
		path := filepath.Join(t.TempDir(), "nested", "dir", "lease.json")
		return func(t *testing.T) ports.ObjectCAS { return open(t, path) }
	})
}

func TestExplicitModeRegardlessOfUmask(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "state.json")
	s := open(t, path)
	if _, err := s.Put(t.Context(), []byte("{}"), ports.CreateOnly()); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + ".lock"} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != file.DefaultMode {
			t.Fatalf("%s has mode %v under umask 077, want %v", p, st.Mode().Perm(), file.DefaultMode)
		}
	}
}

func TestDirectoryWhereTheFileShouldBe(t *testing.T) {
	dir := t.TempDir()
	if _, err := file.New(file.Config{Path: dir}); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Fatalf("New on a directory: %v", err)
	}
}

func TestErrorClassification(t *testing.T) {
	t.Run("absent is not found", func(t *testing.T) {
		_, err := open(t, filepath.Join(t.TempDir(), "x")).Get(t.Context())
		if !errors.Is(err, ports.ErrNotFound) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("unwritable directory is permission denied", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = os.Chmod(dir, 0o700) }()
		path := filepath.Join(dir, "x")
		if os.Geteuid() != 0 {
			_, err := open(t, path).Put(t.Context(), []byte("x"), ports.CreateOnly())
			if !errors.Is(err, ports.ErrPermissionDenied) {
				t.Fatalf("got %v", err)
			}
			return
		}
		// Root ignores modes: ask an unprivileged helper process, in a
		// directory it may traverse but not write.
		dir = publicDir(t)
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		out := runAs(t, 65534, "put", filepath.Join(dir, "x"))
		if out != "permission-denied" {
			t.Fatalf("an unprivileged process writing into a read-only directory: %q, want permission-denied", out)
		}
	})
	t.Run("lock timeout is transient", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "state.json")
		holder := open(t, path)
		if _, err := holder.Put(t.Context(), []byte("x"), ports.CreateOnly()); err != nil {
			t.Fatal(err)
		}
		// Hold the write lock from another process while this one writes.
		cmd := helper(t, "hold-lock", path+".lock")
		s, err := file.New(file.Config{Path: path, LockTimeout: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Put(t.Context(), []byte("y"), ports.CreateOnly())
		if !ports.IsTransient(err) || !strings.Contains(err.Error(), "lock") {
			t.Fatalf("write while another process holds the lock: %v, want transient lock timeout", err)
		}
		// A caller's deadline that ends the wait says what it waited for:
		// the standby of a leader paused mid-write logs this until that
		// leader resumes or exits.
		patient, err := file.New(file.Config{Path: path, LockTimeout: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		_, err = patient.Put(ctx, []byte("y"), ports.CreateOnly())
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "another writer holds") {
			t.Fatalf("write whose deadline ends while another process holds the lock: %v, want the deadline, naming the held lock", err)
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		// The kernel dropped the dead process's lock.
		obj, _ := s.Get(t.Context())
		if _, err := s.Put(t.Context(), []byte("y"), ports.IfVersion(obj.Version)); err != nil {
			t.Fatalf("write after the holder died: %v", err)
		}
	})
}

func TestInstanceLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	l, err := file.LockInstance(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = file.LockInstance(path, 0)
	if !errors.Is(err, ports.ErrAlreadyRunning) || !strings.Contains(err.Error(), l.Path()) ||
		!strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("second lock: %v, want ErrAlreadyRunning naming the lock and the holder", err)
	}
	// Another process is refused too.
	if out := runAs(t, -1, "instance-lock", path); out != "already-running" {
		t.Fatalf("another process taking the instance lock: %q, want already-running", out)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	l2, err := file.LockInstance(path, 0)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	_ = l2.Release()
	_ = l.Release()
}

// helperCmd runs the test binary bin as a helper process in mode with args
// (see TestHelperProcess).
func helperCmd(bin, mode string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), "SF2LOKI_FILE_HELPER="+mode, "SF2LOKI_FILE_ARGS="+strings.Join(args, "\x1f"))
	return cmd
}

// helper starts this test binary as a helper process in mode and waits for
// it to say READY.
func helper(t *testing.T, mode string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := helperCmd(os.Args[0], mode, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if sc.Text() == "READY" {
			go func() {
				for sc.Scan() {
				}
			}()
			return cmd
		}
	}
	t.Fatalf("helper %s did not become ready", mode)
	return nil
}

// TestHelperProcess is the body of the helper processes; it does nothing in
// a normal run.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv("SF2LOKI_FILE_HELPER")
	if mode == "" {
		return
	}
	args := strings.Split(os.Getenv("SF2LOKI_FILE_ARGS"), "\x1f")
	switch mode {
	case "hold-lock":
		f, err := os.OpenFile(args[0], os.O_RDWR|os.O_CREATE, 0o640)
		if err != nil {
			fmt.Println("ERR", err)
			os.Exit(2)
		}
		lk := syscall.Flock_t{Type: syscall.F_WRLCK}
		if err := syscall.FcntlFlock(f.Fd(), 37 /* F_OFD_SETLK */, &lk); err != nil {
			fmt.Println("ERR", err)
			os.Exit(2)
		}
		fmt.Println("READY")
		for { // hold the lock until killed (a bare select{} is a fatal deadlock, which drops it)
			time.Sleep(time.Hour)
		}
	case "put":
		_, err := open(t, args[0]).Put(context.Background(), []byte("x"), ports.CreateOnly())
		fmt.Println(classified(err))
	case "instance-lock":
		_, err := file.LockInstance(args[0], 0)
		fmt.Println(classified(err))
	case "keeper":
		keeperWorker(args)
	case "increment":
		incrementWorker(args)
	case "create":
		createWorker(args)
	}
	os.Exit(0)
}

// classified names the class of err for a parent process to check.
func classified(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ports.ErrPermissionDenied):
		return "permission-denied"
	case errors.Is(err, ports.ErrAlreadyRunning):
		return "already-running"
	case ports.IsTransient(err):
		return "transient"
	}
	return "other: " + err.Error()
}

// runAs runs a helper in mode as uid (-1: this user) and returns its output.
func runAs(t *testing.T, uid int, mode string, args ...string) string {
	t.Helper()
	bin := os.Args[0]
	if uid >= 0 {
		// The build directory is private to this user: copy the binary out.
		bin = filepath.Join(publicDir(t), "helper.test")
		data, err := os.ReadFile(os.Args[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := helperCmd(bin, mode, args...)
	if uid >= 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper %s: %v\n%s", mode, err, out)
	}
	return strings.TrimSpace(string(out))
}

// publicDir returns a fresh directory every user may read and traverse.
func publicDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sf2loki-file-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = os.Chmod(dir, 0o700)
		_ = os.RemoveAll(dir)
	})
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// incrementWorker performs n compare-and-swap increments of the counter in
// path, retrying lost races, then prints DONE and how many it lost.
func incrementWorker(args []string) {
	path, n := args[0], atoi(args[1])
	s, err := file.New(file.Config{Path: path, LockTimeout: 30 * time.Second})
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(2)
	}
	fmt.Println("READY")
	waitFor(args[2])
	ctx := context.Background()
	lost := 0
	for done := 0; done < n; {
		obj, err := s.Get(ctx)
		if err != nil {
			fmt.Println("ERR get", err)
			os.Exit(2)
		}
		next := []byte(strconv.Itoa(atoi(string(obj.Data)) + 1))
		_, err = s.Put(ctx, next, ports.IfVersion(obj.Version))
		switch {
		case err == nil:
			done++
		case errors.Is(err, ports.ErrPreconditionFailed):
			lost++
		default:
			fmt.Println("ERR put", err)
			os.Exit(2)
		}
	}
	fmt.Println("DONE lost", lost)
}

func createWorker(args []string) {
	s, err := file.New(file.Config{Path: args[0], LockTimeout: 30 * time.Second})
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(2)
	}
	fmt.Println("READY")
	waitFor(args[1])
	_, err = s.Put(context.Background(), []byte("winner "+strconv.Itoa(os.Getpid())), ports.CreateOnly())
	switch {
	case err == nil:
		fmt.Println("WON")
	case errors.Is(err, ports.ErrPreconditionFailed):
		fmt.Println("LOST")
	default:
		fmt.Println("ERR", err)
		os.Exit(2)
	}
}

// waitFor polls until path exists: the start gun.
func waitFor(path string) {
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(strings.TrimSpace(s))
	return n
}

// runWorkers starts procs helper processes in mode, fires the start gun and
// returns each one's output.
func runWorkers(t *testing.T, procs int, mode string, args ...string) []string {
	t.Helper()
	gun := filepath.Join(t.TempDir(), "go")
	outs := make([]string, procs)
	var wg sync.WaitGroup
	cmds := make([]*exec.Cmd, procs)
	readers := make([]*bufio.Scanner, procs)
	for i := range procs {
		cmd := helperCmd(os.Args[0], mode, append(args, gun)...)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i], readers[i] = cmd, bufio.NewScanner(stdout)
		if !readers[i].Scan() || readers[i].Text() != "READY" {
			t.Fatalf("worker %d did not start: %q", i, readers[i].Text())
		}
	}
	if err := os.WriteFile(gun, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range procs {
		wg.Go(func() {
			var b strings.Builder
			for readers[i].Scan() {
				b.WriteString(readers[i].Text() + "\n")
			}
			outs[i] = b.String()
			if err := cmds[i].Wait(); err != nil {
				t.Errorf("worker %d: %v\n%s", i, err, outs[i])
			}
		})
	}
	wg.Wait()
	return outs
}

func TestMultiProcessIncrementsLoseNoUpdate(t *testing.T) {
	const procs, total = 8, 1000
	path := filepath.Join(t.TempDir(), "counter")
	if _, err := open(t, path).Put(t.Context(), []byte("0"), ports.CreateOnly()); err != nil {
		t.Fatal(err)
	}
	outs := runWorkers(t, procs, "increment", path, strconv.Itoa(total/procs))
	lost := 0
	for i, out := range outs {
		if !strings.HasPrefix(out, "DONE lost ") {
			t.Fatalf("worker %d: %q", i, out)
		}
		lost += atoi(strings.TrimPrefix(out, "DONE lost "))
	}
	obj, err := open(t, path).Get(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got := atoi(string(obj.Data)); got != total {
		t.Fatalf("counter = %d after %d increments from %d processes: %d updates lost", got, total, procs, total-got)
	}
	t.Logf("%d processes, %d increments, counter %d, %d lost races retried", procs, total, total, lost)
}

func TestMultiProcessCreateOnlyOneWinner(t *testing.T) {
	const procs = 8
	path := filepath.Join(t.TempDir(), "lease.json")
	outs := runWorkers(t, procs, "create", path)
	won, lost := 0, 0
	for i, out := range outs {
		switch strings.TrimSpace(out) {
		case "WON":
			won++
		case "LOST":
			lost++
		default:
			t.Fatalf("worker %d: %q", i, out)
		}
	}
	if won != 1 || lost != procs-1 {
		t.Fatalf("%d winners, %d losers of %d concurrent create-only writers", won, lost, procs)
	}
}

func TestGetRefusesADocumentOverTheCap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leader.lease")
	big := []byte(strings.Repeat("x", 4096))
	if err := os.WriteFile(path, big, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := file.New(file.Config{Path: path, MaxSize: 1024})
	if err != nil {
		t.Fatal(err)
	}
	obj, err := s.Get(t.Context())
	if !errors.Is(err, ports.ErrTooLarge) || obj.Data != nil || obj.Version == "" || !strings.Contains(err.Error(), "4096 bytes") {
		t.Fatalf("Get of a 4096-byte file with a 1024-byte cap: %v (data %d bytes, version %q)", err, len(obj.Data), obj.Version)
	}
	// The version is the one a full read gives: the oversized document can
	// still be replaced with an if-version write.
	full := open(t, path)
	whole, err := full.Get(t.Context())
	if err != nil || whole.Version != obj.Version {
		t.Fatalf("the default cap reads 4096 bytes: %v, version %q vs %q", err, whole.Version, obj.Version)
	}
	if _, err := s.Put(t.Context(), []byte("{}"), ports.IfVersion(obj.Version)); err != nil {
		t.Fatalf("replacing the oversized document: %v", err)
	}
	// A write over the cap is refused and writes nothing.
	if _, err := s.Put(t.Context(), big, ports.CreateOnly()); !errors.Is(err, ports.ErrTooLarge) {
		t.Fatalf("Put over the cap: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "{}" {
		t.Fatalf("the file after a refused write: %q", b)
	}
	// The default cap: file.DefaultMaxSize.
	huge := filepath.Join(t.TempDir(), "state.json")
	if err := os.WriteFile(huge, make([]byte, file.DefaultMaxSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := open(t, huge).Get(t.Context()); !errors.Is(err, ports.ErrTooLarge) {
		t.Fatalf("Get over the default cap: %v", err)
	}
}

func TestFirstWriteRemovesStaleTempFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	stale := filepath.Join(dir, ".state.json.tmp-111")
	fresh := filepath.Join(dir, ".state.json.tmp-222")
	other := filepath.Join(dir, ".other.json.tmp-333")
	old := time.Now().Add(-file.StaleTempAge - time.Minute)
	for _, p := range []string{stale, fresh, other} {
		if err := os.WriteFile(p, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
		if p != fresh {
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := open(t, path).Put(t.Context(), []byte("{}"), ports.CreateOnly()); err != nil {
		t.Fatal(err)
	}
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	if exists(stale) || !exists(fresh) || !exists(other) {
		t.Fatalf("after the first write: stale kept %v, fresh kept %v, other file's temp kept %v; want false, true, true",
			exists(stale), exists(fresh), exists(other))
	}
}
