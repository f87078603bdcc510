package main

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/driver/drivertest"
	"github.com/quorumlock/redlock/goredisnode"
	"github.com/quorumlock/redlock/internal/redistest"
)

// securityDoc is the document that gives users the ACL.
const securityDoc = "../../docs/security.md"

// docACL returns the rule line of the ACL in docs/security.md, the
// "ACL SETUSER" line between the acl:begin and acl:end markers, as its
// words.
func docACL(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(securityDoc)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "<!-- acl:begin -->")
	block, _, ok2 := strings.Cut(rest, "<!-- acl:end -->")
	if !ok || !ok2 {
		t.Fatalf("%s has no <!-- acl:begin --> ... <!-- acl:end --> block", securityDoc)
	}
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		if strings.HasPrefix(l, "ACL SETUSER ") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("%s: want one ACL SETUSER line between the markers, got %d:\n%s", securityDoc, len(lines), block)
	}
	return strings.Fields(lines[0])
}

// The ACL that docs/security.md gives is the tested list, word for word:
// "ACL SETUSER locker on >PASSWORD" and drivertest.LeastPrivilege.
func TestSecurityDocACLIsLeastPrivilege(t *testing.T) {
	w := docACL(t)
	if len(w) < 5 || w[2] != "locker" || w[3] != "on" || !strings.HasPrefix(w[4], ">") {
		t.Fatalf("%s: the ACL line does not start ACL SETUSER locker on >PASSWORD: %q", securityDoc, w)
	}
	if !slices.Equal(w[5:], drivertest.LeastPrivilege) {
		t.Fatalf("%s: the ACL rules differ from drivertest.LeastPrivilege:\n doc:    %q\n tested: %q", securityDoc, w[5:], drivertest.LeastPrivilege)
	}
}

// A user made with the very line of docs/security.md locks, releases and
// adopts through the library, and runs 'redlock run', 'run --read',
// 'run --write' and 'inspect', on real servers. Issue 32, item 6.
func TestSecurityDocACLWorks(t *testing.T) {
	t.Parallel()
	w := docACL(t)
	srv := redistest.StartN(t, 3, redistest.Config{})
	var urls []string
	for _, s := range srv {
		args := slices.Clone(w) // ACL SETUSER locker on >PASSWORD rules...
		args[4] = ">s3cret"
		s.MustDo(t, args...)
		urls = append(urls, "redis://locker:s3cret@"+s.Addr())
	}

	// The library, through goredisnode.
	var nodes []redlock.Node
	for _, u := range urls {
		n, err := goredisnode.Dial(u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		nodes = append(nodes, n)
	}
	c, err := redlock.New(nodes, &redlock.Options{DisableQuarantine: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := c.Lock(ctx, "locks:lib", 10*time.Second)
	if err != nil {
		t.Fatalf("Lock as the documented ACL user: %v", err)
	}
	a, err := c.Adopt(ctx, "locks:lib", l.Token())
	if err != nil {
		t.Fatalf("Adopt as the documented ACL user: %v", err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatalf("Release of the adopted lock: %v", err)
	}
	l, err = c.Lock(ctx, "locks:lib", 10*time.Second)
	if err != nil {
		t.Fatalf("Lock after the release: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	rl, err := c.RWLock("locks:rw-lib").RLock(ctx, 10*time.Second)
	if err != nil {
		t.Fatalf("RLock as the documented ACL user: %v", err)
	}
	if err := rl.Release(ctx); err != nil {
		t.Fatalf("Release of a read lock: %v", err)
	}

	// The command, with the URLs from a file.
	file := t.TempDir() + "/nodes"
	if err := os.WriteFile(file, []byte(strings.Join(urls, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	nf := "--nodes-file=" + file
	expect(t, run(t, "run", "--no-quarantine", nf, "locks:cli", "--", "echo", "ran plain"), 0, "ran plain")
	expect(t, run(t, "run", "--no-quarantine", "--read", nf, "locks:cli-rw", "--", "echo", "ran reader"), 0, "ran reader")
	expect(t, run(t, "run", "--no-quarantine", "--write", nf, "locks:cli-rw", "--", "echo", "ran writer"), 0, "ran writer")
	expect(t, run(t, "inspect", "--no-quarantine", nf, "locks:cli-rw"), 0, `lock "locks:cli-rw": FREE (3 of 3 nodes answered`)

	// And the ACL is what keeps the user in: a key outside the pattern
	// is refused.
	expect(t, run(t, "run", "--no-quarantine", nf, "other:cli", "--", "echo", "must not run"), exitNoPerm, "NOPERM")
}
