package redistest

import (
	"bytes"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// expectGone fails t unless no process has the given pid: the process has
// exited and been reaped.
func expectGone(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("pid %d: kill -0 gives %v, want ESRCH", pid, err)
	}
}

func TestServerTCP(t *testing.T) {
	t.Parallel()
	s := Start(t, Config{})
	if s.Network() != "tcp" || !strings.HasPrefix(s.Addr(), "127.0.0.1:") || s.URL() != "redis://"+s.Addr() {
		t.Errorf("Network %q, Addr %q, URL %q", s.Network(), s.Addr(), s.URL())
	}
	if !s.Running() || s.PID() == 0 {
		t.Fatalf("Running %v, PID %d after Start", s.Running(), s.PID())
	}
	expectDo(t, s, "PONG", "PING")
	// The package's own flags are in force.
	expectDo(t, s, []any{"appendonly", "no"}, "CONFIG", "GET", "appendonly")
	expectDo(t, s, []any{"save", ""}, "CONFIG", "GET", "save")
}

func TestServerUnix(t *testing.T) {
	t.Parallel()
	s := Start(t, Config{Unix: true})
	if s.Network() != "unix" || !strings.HasPrefix(s.Addr(), "/tmp/") || s.URL() != "unix://"+s.Addr() {
		t.Errorf("Network %q, Addr %q, URL %q", s.Network(), s.Addr(), s.URL())
	}
	if len(s.Addr()) > 107 {
		t.Errorf("socket path %q is longer than 107 bytes", s.Addr())
	}
	expectDo(t, s, "OK", "SET", "k", "v")
	expectDo(t, s, "v", "GET", "k")
	// Nothing listens on TCP.
	expectDo(t, s, []any{"port", "0"}, "CONFIG", "GET", "port")
}

func TestServerArgs(t *testing.T) {
	t.Parallel()
	s := Start(t, Config{Args: []string{"--maxmemory-policy", "allkeys-lru"}})
	expectDo(t, s, []any{"maxmemory-policy", "allkeys-lru"}, "CONFIG", "GET", "maxmemory-policy")
}

func TestStop(t *testing.T) {
	t.Parallel()
	s := Start(t, Config{})
	pid := s.PID()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if s.Running() || s.PID() != 0 {
		t.Errorf("Running %v, PID %d after Stop", s.Running(), s.PID())
	}
	expectGone(t, pid)
	if _, err := s.Do("PING"); err == nil {
		t.Error("Do after Stop succeeded")
	}
	if err := s.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if err := s.Kill(); err != nil {
		t.Errorf("Kill after Stop: %v", err)
	}
	if err := s.Pause(); err == nil {
		t.Error("Pause of a stopped server succeeded")
	}
}

// TestRestart kills or stops a server and restarts it, and checks that its
// data survives exactly when it has persistence.
func TestRestart(t *testing.T) {
	t.Parallel()
	for _, unix := range []bool{false, true} {
		for _, persistence := range []bool{false, true} {
			for _, how := range []string{"Kill", "Stop", "Restart"} {
				name := how
				if unix {
					name += "/unix"
				}
				if persistence {
					name += "/persistence"
				}
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					s := Start(t, Config{Unix: unix, Persistence: persistence})
					addr, pid := s.Addr(), s.PID()
					expectDo(t, s, "OK", "SET", "k", "v")
					switch how {
					case "Kill":
						if err := s.Kill(); err != nil {
							t.Fatal(err)
						}
						expectGone(t, pid)
					case "Stop":
						if err := s.Stop(); err != nil {
							t.Fatal(err)
						}
						expectGone(t, pid)
					}
					if err := s.Restart(); err != nil {
						t.Fatal(err)
					}
					if s.Addr() != addr {
						t.Errorf("Addr %q after Restart, was %q", s.Addr(), addr)
					}
					if s.PID() == pid || s.PID() == 0 {
						t.Errorf("PID %d after Restart, was %d", s.PID(), pid)
					}
					expectGone(t, pid)
					var want any
					if persistence {
						want = "v"
					}
					expectDo(t, s, want, "GET", "k")
				})
			}
		}
	}
}

func TestPauseResume(t *testing.T) {
	t.Parallel()
	s := Start(t, Config{})
	c := dialTest(t, s.Network(), s.Addr())
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	if !s.Running() {
		t.Error("a paused server is not Running")
	}
	c.send(cmd("PING"))
	c.expectTimeout(200 * time.Millisecond)
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	c.expect("PONG")
	expectDo(t, s, "PONG", "PING")
}

func TestStopPaused(t *testing.T) {
	t.Parallel()
	s := Start(t, Config{})
	pid := s.PID()
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	expectGone(t, pid)
}

func TestRestartPortTaken(t *testing.T) {
	t.Parallel()
	s := Start(t, Config{})
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	err = s.Restart()
	l.Close()
	if !errors.Is(err, errAddrInUse) || !strings.Contains(err.Error(), "--- end of its log ---") {
		t.Fatalf("Restart on a taken port: %v; want errAddrInUse with the log", err)
	}
	if s.Running() {
		t.Error("Running after a failed Restart")
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	expectDo(t, s, "PONG", "PING")
}

func TestStartN(t *testing.T) {
	t.Parallel()
	servers := StartN(t, 5, Config{})
	if len(servers) != 5 {
		t.Fatalf("%d servers, want 5", len(servers))
	}
	addrs, pids := make(map[string]bool), make(map[int]bool)
	for i, s := range servers {
		addrs[s.Addr()], pids[s.PID()] = true, true
		expectDo(t, s, "OK", "SET", "k", s.Addr())
		if i > 0 {
			// Each server has its own data.
			expectDo(t, servers[i-1], servers[i-1].Addr(), "GET", "k")
		}
	}
	if len(addrs) != 5 || len(pids) != 5 {
		t.Errorf("addresses %v, pids %v: want 5 distinct", addrs, pids)
	}
}

func TestClose(t *testing.T) {
	t.Parallel()
	for _, paused := range []bool{false, true} {
		s, err := New(Config{Unix: paused})
		if err != nil {
			t.Fatal(err)
		}
		pid := s.PID()
		if paused {
			if err := s.Pause(); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		expectGone(t, pid)
		if s.Running() {
			t.Error("Running after Close")
		}
		if _, err := os.Stat(s.dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("temporary directory after Close: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if err := s.Restart(); err == nil {
			t.Error("Restart after Close succeeded")
		}
	}
}

func TestDo(t *testing.T) {
	t.Parallel()
	s := Start(t, Config{})
	expectDo(t, s, int64(3), "INCRBY", "n", "3")
	expectDo(t, s, "OK", "SET", "k", "v")
	expectDo(t, s, "v", "GET", "k")
	expectDo(t, s, nil, "GET", "missing")
	expectDo(t, s, int64(2), "RPUSH", "l", "a", "b")
	expectDo(t, s, []any{"a", "b"}, "LRANGE", "l", "0", "-1")
	expectDo(t, s, []any{}, "LRANGE", "missing", "0", "-1")
	expectDo(t, s, []any{int64(1), "x", nil}, "EVAL", "return {1, 'x', false}", "0")
	expectDo(t, s, []any{"k", []any{"a", "b"}}, "EVAL", "return {KEYS[1], ARGV}", "1", "k", "a", "b")

	v, err := s.Do("LPUSH", "k", "x")
	var e Error
	if v != nil || !errors.As(err, &e) || !strings.HasPrefix(string(e), "WRONGTYPE ") {
		t.Errorf("LPUSH on a string: (%#v, %#v), want (nil, Error(\"WRONGTYPE ...\"))", v, err)
	}
	v, err = s.Do("NOSUCHCOMMAND")
	if v != nil || !errors.As(err, &e) || !strings.HasPrefix(err.Error(), "ERR unknown command") {
		t.Errorf("unknown command: (%#v, %#v), want (nil, Error(\"ERR unknown command ...\"))", v, err)
	}
	// Each Do has a connection of its own: HELLO 3 answers with a RESP3
	// map and does not change the next Do.
	hello, err := s.Do("HELLO", "3")
	if m, ok := hello.([]any); err != nil || !ok || len(m) < 2 || m[0] != "server" || m[1] != "redis" {
		t.Errorf("HELLO 3: (%#v, %v)", hello, err)
	}
	expectDo(t, s, []any{"a", "b"}, "LRANGE", "l", "0", "-1")
}

func TestDoIn(t *testing.T) {
	t.Parallel()
	for _, cfg := range []Config{{}, {Unix: true}} {
		s := Start(t, cfg)
		if v, err := s.DoIn(3, "SET", "k", "three"); v != "OK" || err != nil {
			t.Fatalf("DoIn(3, SET): (%#v, %v)", v, err)
		}
		if v, err := s.DoIn(3, "GET", "k"); v != "three" || err != nil {
			t.Errorf("DoIn(3, GET): (%#v, %v), want three", v, err)
		}
		// The key is in database 3 only, and Do still uses database 0.
		if v, err := s.DoIn(0, "EXISTS", "k"); v != int64(0) || err != nil {
			t.Errorf("DoIn(0, EXISTS): (%#v, %v), want 0", v, err)
		}
		expectDo(t, s, int64(0), "EXISTS", "k")

		var e Error
		v, err := s.DoIn(3, "LPUSH", "k", "x")
		if v != nil || !errors.As(err, &e) || !strings.HasPrefix(string(e), "WRONGTYPE ") {
			t.Errorf("DoIn(3, LPUSH) on a string: (%#v, %#v), want (nil, Error(\"WRONGTYPE ...\"))", v, err)
		}
		v, err = s.DoIn(16, "GET", "k")
		if v != nil || !errors.As(err, &e) || !strings.Contains(string(e), "out of range") {
			t.Errorf("DoIn(16, GET): (%#v, %#v), want (nil, Error(\"ERR DB index is out of range\"))", v, err)
		}
		if v, err := s.DoIn(1); v != nil || err == nil {
			t.Errorf("DoIn without a command: (%#v, %v), want an error", v, err)
		}
	}
}

func TestMissingBinary(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := New(Config{})
	want := "redis-server not found in PATH: install Redis 7 or later (on Debian: apt-get install -y redis-server)"
	if err == nil || err.Error() != want {
		t.Errorf("New without redis-server: %v, want %q", err, want)
	}
}

func TestStartFailureShowsLog(t *testing.T) {
	t.Parallel()
	_, err := New(Config{Args: []string{"--no-such-directive", "x"}})
	if err == nil || !strings.Contains(err.Error(), "Bad directive") {
		t.Errorf("New with a bad argument: %v, want the server's complaint", err)
	}
}

func TestEnv(t *testing.T) {
	// redis-server writes its process title over its environment, so the
	// variable is checked by its effect: the dynamic loader complains, in
	// the server's log, about a library it cannot preload.
	srv := Start(t, Config{Env: []string{"LD_PRELOAD=/nonexistent/redistest-env-check.so"}})
	log, err := os.ReadFile(filepath.Join(srv.dir, "redis.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(log, []byte("redistest-env-check.so")) {
		t.Fatalf("the LD_PRELOAD from Config.Env left no trace in the log:\n%s", log)
	}
}
