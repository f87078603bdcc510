//go:build unix

package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"
)

func TestRunPostgres(t *testing.T) { checkRun(t, testConfig(startPostgres(t))) }

func TestStorePostgres(t *testing.T) { testStore(t, startPostgres(t)) }

// installHint says how to get PostgreSQL's server binaries.
const installHint = "install Debian's postgresql package (apt-get install postgresql)"

// startPostgres starts a throwaway PostgreSQL server for t, with a
// cluster of its own in a temporary directory, and returns the URL of
// its database "postgres". The server listens on a unix socket in that
// directory only, so it needs no port. When t ends, the server is
// stopped, by its pid, and the directory removed.
//
// PostgreSQL refuses to run as root; as root, startPostgres runs initdb
// and postgres as the user postgres. Missing binaries fail the test: it
// is never skipped.
func startPostgres(t *testing.T) string {
	t.Helper()
	bin := postgresBin(t)
	cred := postgresCredential(t)
	// Not t.TempDir: its parent is private to this user, and the server
	// may run as another.
	dir, err := os.MkdirTemp("", "inventory-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("removing the PostgreSQL directory: %v", err)
		}
	})
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(dir, "data")
	logPath := filepath.Join(dir, "log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()

	initdb := postgresCommand(bin, "initdb", cred, dir, logFile,
		"-D", data, "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync")
	if err := initdb.Run(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, readLog(logPath))
	}
	server := postgresCommand(bin, "postgres", cred, dir, logFile,
		"-D", data, "-k", dir, "-c", "listen_addresses=", "-c", "fsync=off")
	if err := server.Start(); err != nil {
		t.Fatalf("starting postgres: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- server.Wait() }()
	t.Cleanup(func() { stopPostgres(t, server, exited, logPath) })

	dsn := (&url.URL{
		Scheme:   "postgres",
		User:     url.User("postgres"),
		Path:     "/postgres",
		RawQuery: url.Values{"host": {dir}, "sslmode": {"disable"}}.Encode(),
	}).String()
	if err := waitReady(dsn, exited); err != nil {
		t.Fatalf("postgres did not come up: %v\n%s", err, readLog(logPath))
	}
	return dsn
}

// postgresBin returns the directory of PostgreSQL's server binaries: the
// newest version's under /usr/lib/postgresql, where Debian puts them, or
// else the one that holds postgres on the PATH. It fails t if there is
// none.
func postgresBin(t *testing.T) string {
	t.Helper()
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin") // a bad pattern is the only error
	version := func(dir string) int {
		v, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir))) // 0 for a name that is not a number
		return v
	}
	slices.SortFunc(dirs, func(a, b string) int { return version(b) - version(a) })
	for _, d := range dirs {
		if isExecutable(filepath.Join(d, "initdb")) && isExecutable(filepath.Join(d, "postgres")) {
			return d
		}
	}
	if p, err := exec.LookPath("postgres"); err == nil && isExecutable(filepath.Join(filepath.Dir(p), "initdb")) {
		return filepath.Dir(p)
	}
	t.Fatalf("PostgreSQL's server binaries (initdb, postgres) are neither in /usr/lib/postgresql/*/bin nor on the PATH: %s", installHint)
	return ""
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// postgresCredential returns the user and group to run PostgreSQL as:
// nil, for this process's own, unless it runs as root, which PostgreSQL
// refuses, and then those of the user postgres.
func postgresCredential(t *testing.T) *syscall.Credential {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Fatalf("running as root, PostgreSQL needs the user postgres to run as: %v; %s, which creates it", err, installHint)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		t.Fatalf("user postgres: uid %q: %v", u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		t.Fatalf("user postgres: gid %q: %v", u.Gid, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

// postgresCommand returns a command that runs the program name from bin
// in dir, as cred if it is not nil, with its output going to log.
func postgresCommand(bin, name string, cred *syscall.Credential, dir string, log *os.File, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(bin, name), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.Stdout, cmd.Stderr = log, log
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	return cmd
}

// waitReady waits until the server at dsn accepts a connection, for at
// most a minute, or until it has exited.
func waitReady(dsn string, exited <-chan error) error {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err = db.PingContext(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no connection within a minute: %w", err)
		}
		select {
		case werr := <-exited:
			return fmt.Errorf("postgres exited: %v", werr)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stopPostgres stops the server by its pid with SIGINT, its fast
// shutdown, and kills it if it is still running 30 seconds later.
func stopPostgres(t *testing.T, server *exec.Cmd, exited <-chan error, logPath string) {
	if err := server.Process.Signal(syscall.SIGINT); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("stopping postgres (pid %d): %v", server.Process.Pid, err)
	}
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Errorf("postgres (pid %d) still runs 30s after SIGINT; killing it\n%s", server.Process.Pid, readLog(logPath))
		if err := server.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Errorf("killing postgres (pid %d): %v", server.Process.Pid, err)
		}
		<-exited
	}
}

// readLog returns the server's log, for a failure message.
func readLog(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	return string(b)
}
