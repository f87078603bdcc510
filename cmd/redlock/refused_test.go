package main

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/driver/drivertest"
	"github.com/quorumlock/redlock/internal/redistest"
)

// Nodes that refuse for good make run fail at once, without a wait, with
// the cause and its own exit status: 77 for credentials and ACLs, 78 for
// nodes or keys unfit for locks.
func TestRunRefused(t *testing.T) {
	t.Parallel()
	srv := redistest.StartN(t, 3, redistest.Config{})
	for _, s := range srv {
		s.MustDo(t, "ACL", "SETUSER", "alice", "on", ">right-password", "~*", "&*", "+@all")
	}
	var wrong []string
	for _, s := range srv {
		wrong = append(wrong, "redis://alice:wrong-password@"+s.Addr())
	}
	notRun := func(r result) {
		t.Helper()
		if strings.Contains(r.stdout, "must not run") || strings.Contains(r.stderr, "waiting for the lock") {
			t.Fatalf("run waited, or ran the command without the lock:\n%s", r)
		}
	}

	// No --wait: without the refusal, run would wait until killed.
	r := run(t, "run", "--no-quarantine", "--nodes", strings.Join(wrong, ","), "k", "--", "echo", "must not run")
	expect(t, r, exitNoPerm, "cannot be acquired", "3 of 3 nodes refused", "WRONGPASS", "user name or password")
	notRun(r)

	// An ACL user that may run the scripts but not INFO, which they call:
	// a permission problem, though the server calls it ERR.
	var denied []string
	for _, s := range srv {
		s.MustDo(t, append([]string{"ACL", "SETUSER", "noinfo", "on", ">pw"}, append(drivertest.LeastPrivilege, "~*", "-info")...)...)
		denied = append(denied, "redis://noinfo:pw@"+s.Addr())
	}
	r = run(t, "run", "--no-quarantine", "--nodes", strings.Join(denied, ","), "k", "--", "echo", "must not run")
	expect(t, r, exitNoPerm, "3 of 3 nodes refused", "can't run this command", "ACL")
	notRun(r)

	// A key that holds a hash on two nodes of three.
	for _, s := range srv[:2] {
		s.MustDo(t, "HSET", "hashkey", "f", "v")
	}
	r = run(t, "run", "--no-quarantine", nodesFlag(srv...), "hashkey", "--", "echo", "must not run")
	expect(t, r, exitConfig, "2 of 3 nodes refused", "WRONGTYPE", "another type")
	notRun(r)
	if strings.Contains(r.stderr, "unreachable") || strings.Contains(r.stderr, "no quorum") {
		t.Fatalf("a refusal reported as unreachable:\n%s", r)
	}

	// A replica.
	replica := redistest.Start(t, redistest.Config{})
	host, port, _ := strings.Cut(srv[0].Addr(), ":")
	replica.MustDo(t, "REPLICAOF", host, port)
	waitFor(t, 30*time.Second, "the replica to synchronise", func() bool {
		v, err := replica.Do("INFO", "replication")
		s, _ := v.(string)
		return err == nil && strings.Contains(s, "master_link_status:up")
	})
	r = run(t, "run", "--no-quarantine", "--wait", "0s", nodesFlag(replica), "k", "--", "echo", "must not run")
	expect(t, r, exitConfig, "READONLY", "replica")
	notRun(r)
}

// Doctor names each refusal per node: a wrong password, an ACL without
// the scripting commands, a replica, a full node.
func TestDoctorRefusals(t *testing.T) {
	t.Parallel()
	auth := redistest.Start(t, redistest.Config{})
	auth.MustDo(t, "ACL", "SETUSER", "alice", "on", ">right-password", "~*", "&*", "+@all")
	noperm := redistest.Start(t, redistest.Config{})
	noperm.MustDo(t, "ACL", "SETUSER", "bob", "on", ">right-password", "~*", "&*", "+@all", "-evalsha", "-eval")
	full := redistest.Start(t, redistest.Config{Args: []string{"--maxmemory", "3mb", "--maxmemory-policy", "noeviction"}})
	value := strings.Repeat("x", 64<<10)
	for i := 0; i < 10000; i++ {
		if _, err := full.Do("SET", "filler:"+strconv.Itoa(i), value); err != nil {
			if !strings.HasPrefix(err.Error(), "OOM") {
				t.Fatal(err)
			}
			break
		}
	}
	// Its connections count too, and each Do is one: keep it full once
	// they are gone.
	info, _ := full.MustDo(t, "INFO", "memory").(string)
	_, used, _ := strings.Cut(info, "used_memory:")
	used, _, _ = strings.Cut(used, "\r\n")
	n, err := strconv.ParseInt(used, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	full.MustDo(t, "CONFIG", "SET", "maxmemory", strconv.FormatInt(n-128<<10, 10))
	nodes := strings.Join([]string{
		"redis://alice:wrong-password@" + auth.Addr(),
		"redis://bob:right-password@" + noperm.Addr(),
		full.URL(),
	}, ",")
	r := run(t, "doctor", "--no-quarantine", "--nodes", nodes)
	expect(t, r, exitNoQuorum,
		"ERROR  access", "refused: WRONGPASS", "user name or password",
		"ERROR  scripts", "refused the lock scripts: NOPERM", "ACL",
		"ERROR  memory", "full: used memory", "(OOM)")
	if strings.Contains(r.stdout, "unreachable") {
		t.Fatalf("a node that answered is called unreachable:\n%s", r)
	}
}
