package redistest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

const (
	startTimeout = 10 * time.Second      // for a new process to answer PING
	pollInterval = 20 * time.Millisecond // between PINGs while it starts
	stopTimeout  = 5 * time.Second       // from SIGTERM to SIGKILL in Stop
	reapTimeout  = 10 * time.Second      // from SIGKILL to the process being reaped
	doTimeout    = 5 * time.Second       // for one Do
	bindAttempts = 5                     // ports tried by New before giving up
	logTailLines = 30                    // lines of the server's log shown in errors
)

// errMissing is what New returns when there is no redis-server in PATH.
var errMissing = errors.New("redis-server not found in PATH: install Redis 7 or later (on Debian: apt-get install -y redis-server)")

// errAddrInUse is wrapped by the errors of a server that could not listen
// because another process had taken its port.
var errAddrInUse = errors.New("address already in use")

// Config says how to run one server.
type Config struct {
	// Unix makes the server listen on a unix socket, in a temporary
	// directory under /tmp, instead of on a loopback TCP port.
	Unix bool
	// Persistence makes the server keep an append-only file, synced after
	// every write, in its own data directory, so that the data survives
	// Kill and Restart. Without it the server saves nothing and comes back
	// empty.
	Persistence bool
	// Args are extra redis-server arguments, such as
	// {"--maxmemory-policy", "allkeys-lru"}. They come last, so they can
	// override the package's own.
	Args []string
	// Env holds extra environment variables for the process, such as
	// "LD_PRELOAD=/path/to/shim.so", added to the test's own environment.
	Env []string
}

// A Server is one redis-server process that keeps its address and data
// directory across restarts. It is safe for concurrent use.
type Server struct {
	cfg     Config
	bin     string // redis-server's path, as found by New
	dir     string // temporary directory: data, log and unix socket
	network string // "tcp" or "unix"
	addr    string // "127.0.0.1:PORT" or the socket's path
	mode    mode   // a plain server, a cluster node or a Sentinel
	busPort string // the cluster bus's port, for a cluster node

	mu     sync.Mutex // serializes starting, signalling, stopping and closing
	closed bool

	proc atomic.Pointer[process] // the current or last process
}

// A process is one run of redis-server.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd.Wait has reaped the process
}

// New starts a redis-server process as cfg says and waits until it answers
// PING. If the process does not come up, the error includes the end of its
// log.
func New(cfg Config) (*Server, error) {
	return newServer(cfg, plain, "")
}

// A mode is what a redis-server process runs as.
type mode int

const (
	plain    mode = iota
	cluster       // a cluster node, with its cluster bus on a free port of its own
	sentinel      // a Sentinel, with its configuration in sentinelConf
)

// sentinelConf is the name of a Sentinel's configuration file in its
// directory.
const sentinelConf = "sentinel.conf"

// newServer is New for a server that runs in mode m. A Sentinel starts
// with the configuration conf.
func newServer(cfg Config, m mode, conf string) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errMissing
	}
	// The whole path of a unix socket must fit in 107 bytes, so its
	// directory is a short one in /tmp whatever $TMPDIR says.
	base := ""
	if cfg.Unix {
		base = "/tmp"
	}
	dir, err := os.MkdirTemp(base, "redistest-")
	if err != nil {
		return nil, fmt.Errorf("redistest: %w", err)
	}
	cfg.Args = slices.Clone(cfg.Args)
	cfg.Env = slices.Clone(cfg.Env)
	s := &Server{cfg: cfg, bin: bin, dir: dir, mode: m}
	if m != plain && cfg.Unix {
		os.RemoveAll(dir)
		return nil, errors.New("redistest: a cluster node or a Sentinel needs TCP: Config.Unix is not supported")
	}
	if m == sentinel {
		if err := os.WriteFile(filepath.Join(dir, sentinelConf), []byte(conf), 0o600); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("redistest: %w", err)
		}
	}
	if cfg.Unix {
		s.network, s.addr = "unix", filepath.Join(dir, "redis.sock")
		err = s.start()
	} else {
		s.network = "tcp"
		err = s.startOnFreePort()
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// Start is like New but fails t if the server does not start, and closes
// the server when t ends.
func Start(t testing.TB, cfg Config) *Server {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeIn(t, s) })
	return s
}

// StartN starts n servers as Start does, concurrently.
func StartN(t testing.TB, n int, cfg Config) []*Server {
	t.Helper()
	servers := make([]*Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			servers[i], errs[i] = New(cfg)
		}()
	}
	wg.Wait()
	for _, s := range servers {
		if s != nil {
			t.Cleanup(func() { closeIn(t, s) })
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return servers
}

// closeIn closes s at the end of t.
func closeIn(t testing.TB, s *Server) {
	if err := s.Close(); err != nil {
		t.Error(err)
	}
}

// Addr returns the server's address: "127.0.0.1:PORT" or the unix socket's
// path.
func (s *Server) Addr() string { return s.addr }

// Network returns "tcp" or "unix".
func (s *Server) Network() string { return s.network }

// URL returns the server's URL: "redis://127.0.0.1:PORT" or
// "unix:///path/to/socket".
func (s *Server) URL() string {
	if s.network == "unix" {
		return "unix://" + s.addr
	}
	return "redis://" + s.addr
}

// ForMain starts n servers with cfg for the tests of a package, from its
// TestMain, before Main: it returns them, and the option that makes Main
// close them once the tests have run. If one cannot start, ForMain closes
// those that did, prints the error and exits the process, as a TestMain
// would.
//
//	func TestMain(m *testing.M) {
//		servers, closeAll := redistest.ForMain(3, redistest.Config{})
//		urls = redistest.URLs(servers)
//		redistest.Main(m, closeAll)
//	}
func ForMain(n int, cfg Config) ([]*Server, MainOption) {
	servers := make([]*Server, 0, n)
	closeAll := func() {
		for _, s := range servers {
			s.Close()
		}
	}
	for range n {
		s, err := New(cfg)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			closeAll()
			os.Exit(1)
		}
		servers = append(servers, s)
	}
	return servers, Cleanup(closeAll)
}

// URLs returns the URLs of servers, in order.
func URLs(servers []*Server) []string {
	urls := make([]string, len(servers))
	for i, s := range servers {
		urls[i] = s.URL()
	}
	return urls
}

// PID returns the process id of the running server, or 0 if it is not
// running.
func (s *Server) PID() int {
	if p := s.proc.Load(); p != nil && p.running() {
		return p.cmd.Process.Pid
	}
	return 0
}

// Running reports whether the server's process is alive; a paused process
// is.
func (s *Server) Running() bool { return s.PID() != 0 }

// Stop stops the server with SIGTERM, which lets it shut down cleanly, and
// waits until it has exited. If it is still running 5s later, Stop kills it
// and reports an error. Stopping a server that is not running does nothing.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stop()
}

// Kill kills the server with SIGKILL, and any child it forked to save its
// data, and waits until it has exited. Killing a server that is not running
// does nothing.
func (s *Server) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.proc.Load(); p != nil && p.running() {
		return p.kill()
	}
	return nil
}

// Pause freezes the server with SIGSTOP: connections to it are accepted by
// the kernel, but nothing is answered until Resume.
func (s *Server) Pause() error { return s.signal(syscall.SIGSTOP) }

// Resume lets a paused server run again with SIGCONT.
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT) }

// Restart stops the server if it is running and starts a new process on the
// same address with the same configuration and data directory, then waits
// until it answers PING. With Config.Persistence the data survives; without
// it the server comes back empty.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("redistest: Restart of a closed server")
	}
	if err := s.stop(); err != nil {
		return err
	}
	return s.start()
}

// Close kills the server, waits until it has exited and removes its
// temporary directory. Closing a closed server does nothing.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var err error
	// SIGKILL ends a paused process too.
	if p := s.proc.Load(); p != nil && p.running() {
		err = p.kill()
	}
	if rmErr := os.RemoveAll(s.dir); rmErr != nil {
		err = errors.Join(err, fmt.Errorf("redistest: %w", rmErr))
	}
	return err
}

// Do sends one command to the server over a connection of its own and
// returns the reply: an integer as an int64, a simple, bulk or verbatim
// string or a big number as a string, a double as a float64, a boolean as a
// bool, an array, set, push or map as a []any (a map's keys and values
// alternating, elements decoded alike) and a null as nil. An error reply is
// returned as (nil, [Error]). Do gives up after 5s.
func (s *Server) Do(args ...string) (any, error) {
	if len(args) == 0 {
		return nil, errors.New("redistest: Do without a command")
	}
	replies, err := exchange(s.network, s.addr, doTimeout, args)
	if err != nil {
		return nil, err
	}
	v := replies[0].decode()
	if e, ok := v.(Error); ok {
		return nil, e
	}
	return v, nil
}

// MustDo is like Do but fails t on an error, an error reply included.
func (s *Server) MustDo(t testing.TB, args ...string) any {
	t.Helper()
	v, err := s.Do(args...)
	if err != nil {
		t.Fatalf("%s: %v", strings.Join(args, " "), err)
	}
	return v
}

// DoIn is like Do but runs the command in database db: it sends SELECT db
// and the command on one connection of its own, and returns the reply to
// the command. An error reply to SELECT is returned as (nil, [Error]).
func (s *Server) DoIn(db int, args ...string) (any, error) {
	if len(args) == 0 {
		return nil, errors.New("redistest: DoIn without a command")
	}
	replies, err := exchange(s.network, s.addr, doTimeout, []string{"SELECT", strconv.Itoa(db)}, args)
	if err != nil {
		return nil, err
	}
	for _, r := range replies {
		if e, ok := r.decode().(Error); ok {
			return nil, e
		}
	}
	return replies[1].decode(), nil
}

// exchange dials addr, sends the commands in one write and reads a reply to
// each, all within timeout.
func exchange(network, addr string, timeout time.Duration, cmds ...[]string) ([]value, error) {
	conn, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, fmt.Errorf("redistest: %w", err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return nil, fmt.Errorf("redistest: %w", err)
	}
	var req []byte
	for _, args := range cmds {
		req = appendCommand(req, args...)
	}
	if _, err := conn.Write(req); err != nil {
		return nil, fmt.Errorf("redistest: %w", err)
	}
	r := newRESPReader(conn)
	replies := make([]value, len(cmds))
	for i := range replies {
		if replies[i], err = r.readValue(); err != nil {
			return nil, fmt.Errorf("redistest: reading reply to %s: %w", cmds[i][0], err)
		}
	}
	return replies, nil
}

// startOnFreePort starts the server on a port that the kernel has just
// handed out, and a cluster node's bus on another. Another process may
// take a port before redis-server binds it, so it tries again with new
// ports a few times.
func (s *Server) startOnFreePort() error {
	for attempt := 1; ; attempt++ {
		addr, err := freePort()
		if err != nil {
			return err
		}
		s.addr = addr
		if s.mode == cluster {
			bus, err := freePort()
			if err != nil {
				return err
			}
			_, s.busPort, _ = net.SplitHostPort(bus)
		}
		err = s.start()
		if err == nil || !errors.Is(err, errAddrInUse) || attempt == bindAttempts {
			return err
		}
	}
}

// freePort returns a loopback address with a port that the kernel has just
// handed out.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("redistest: finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// start runs a new process on s.addr and waits until it answers PING.
func (s *Server) start() error {
	logPath := filepath.Join(s.dir, "redis.log")
	// The process writes its early errors, such as a bad argument, to
	// stderr and the rest to its log file: both go to the same file.
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("redistest: %w", err)
	}
	info, err := logFile.Stat()
	if err != nil {
		logFile.Close()
		return fmt.Errorf("redistest: %w", err)
	}
	logStart := info.Size()
	cmd := exec.Command(s.bin, s.args(logPath)...)
	cmd.Dir = s.dir
	if len(s.cfg.Env) > 0 {
		cmd.Env = append(os.Environ(), s.cfg.Env...)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	err = startProcess(cmd)
	logFile.Close()
	if err != nil {
		return fmt.Errorf("redistest: starting redis-server: %w", err)
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	go func() {
		cmd.Wait() // the exit status is in cmd.ProcessState
		close(p.exited)
	}()
	s.proc.Store(p)

	if err := s.waitReady(p); err != nil {
		p.kill()
		tail := logTail(logPath, logStart)
		if strings.Contains(tail, "Address already in use") {
			err = fmt.Errorf("%w (%w)", errAddrInUse, err)
		}
		return fmt.Errorf("redistest: redis-server on %s: %w\n--- end of its log ---\n%s", s.addr, err, tail)
	}
	return nil
}

// args returns the process's arguments.
func (s *Server) args(logPath string) []string {
	var args []string
	if s.mode == sentinel {
		// The configuration file comes first; Sentinel rewrites it.
		args = []string{filepath.Join(s.dir, sentinelConf), "--sentinel"}
	}
	if s.network == "unix" {
		args = append(args, "--port", "0", "--unixsocket", s.addr, "--unixsocketperm", "700")
	} else {
		host, port, _ := net.SplitHostPort(s.addr)
		args = append(args, "--port", port, "--bind", host)
	}
	args = append(args,
		"--dir", s.dir,
		"--logfile", logPath,
		"--daemonize", "no",
		"--protected-mode", "no",
		"--save", "", // no RDB snapshots: persistence, if any, is the AOF
	)
	if s.cfg.Persistence {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		args = append(args, "--appendonly", "no")
	}
	if s.mode == cluster {
		args = append(args,
			"--cluster-enabled", "yes",
			// In the data directory, where it survives Kill and Restart.
			"--cluster-config-file", "nodes.conf",
			"--cluster-port", s.busPort,
			"--cluster-node-timeout", strconv.Itoa(int(clusterNodeTimeout/time.Millisecond)),
		)
	}
	return append(args, s.cfg.Args...)
}

// waitReady waits until p answers PING on s.addr.
func (s *Server) waitReady(p *process) error {
	deadline := time.Now().Add(startTimeout)
	for {
		err := s.ping(p.cmd.Process.Pid)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer to PING within %v: %w", startTimeout, err)
		}
		select {
		case <-p.exited:
			return fmt.Errorf("exited while starting (%v)", p.cmd.ProcessState)
		case <-time.After(pollInterval):
		}
	}
}

// ping checks that the process with the given pid answers PING on s.addr.
// While it loads its data it answers with a LOADING error; and if another
// server has taken the port, that one answers, with its own pid.
func (s *Server) ping(pid int) error {
	replies, err := exchange(s.network, s.addr, time.Second, []string{"PING"}, []string{"INFO", "server"})
	if err != nil {
		return err
	}
	if r := replies[0]; r.kind != '+' || r.str != "PONG" {
		return fmt.Errorf("PING answered %q", r.str)
	}
	if !strings.Contains(replies[1].str, "\r\nprocess_id:"+strconv.Itoa(pid)+"\r\n") {
		return errors.New("another process answers on this address")
	}
	return nil
}

// stop is Stop with s.mu held.
func (s *Server) stop() error {
	p := s.proc.Load()
	if p == nil || !p.running() {
		return nil
	}
	// A paused process acts on SIGTERM only once it runs again.
	for _, sig := range []os.Signal{syscall.SIGTERM, syscall.SIGCONT} {
		if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return fmt.Errorf("redistest: %w", err)
		}
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(stopTimeout):
	}
	if err := p.kill(); err != nil {
		return err
	}
	return fmt.Errorf("redistest: redis-server (pid %d) was still running %v after SIGTERM and was killed", p.cmd.Process.Pid, stopTimeout)
}

// signal sends sig to the running server.
func (s *Server) signal(sig os.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.proc.Load()
	if p == nil || !p.running() {
		return fmt.Errorf("redistest: %v to a server that is not running", sig)
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("redistest: %w", err)
	}
	return nil
}

func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL to p's process group, which holds p and any child it
// forked to save its data, and waits until p has been reaped.
func (p *process) kill() error {
	pid := p.cmd.Process.Pid
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("redistest: killing redis-server (pid %d): %w", pid, err)
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(reapTimeout):
		return fmt.Errorf("redistest: redis-server (pid %d) still running %v after SIGKILL", pid, reapTimeout)
	}
}

// logTail returns the last lines that were written to the log at path
// after offset from.
func logTail(path string, from int64) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read the log: %v)", err)
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return fmt.Sprintf("(cannot read the log: %v)", err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(cannot read the log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-logTailLines):], "\n")
}
