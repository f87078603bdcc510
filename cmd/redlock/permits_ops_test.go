//go:build linux

// The operators' view of a semaphore: inspect --permits shows its slots,
// release --force --permits --slot frees one. Linux only, as the terminal
// of release's question is a Linux pseudo-terminal (release_linux_test.go).

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/internal/wire"
)

// opsHoldScript records the permit's slot, fence and holder ID in "held",
// and runs until the file "stop" appears.
const opsHoldScript = `echo "$REDLOCK_SLOT $REDLOCK_FENCE $REDLOCK_LOCK_ID" > held.tmp && mv held.tmp held; ` +
	`while [ ! -e stop ]; do sleep 0.05; done`

// An opsHolder is a 'redlock run --permits' that holds a permit until it
// is stopped.
type opsHolder struct {
	p     *proc
	dir   string
	owner string
	slot  int
	fence int64
	id    string
}

// startHolders starts one 'redlock run --permits n' per owner on the
// semaphore key, each with a TTL of minutes, one after another, so that
// the nodes agree on the slots: rounds that contend may be granted
// different slots by different nodes, and a node keeps such a grant for
// its holder until the permit is released.
func startHolders(t *testing.T, nodes, key string, n int, owners ...string) []*opsHolder {
	t.Helper()
	hs := make([]*opsHolder, len(owners))
	for i, owner := range owners {
		dir := t.TempDir()
		h := &opsHolder{dir: dir, owner: owner,
			p: start(t, dir, nil, "run", "--no-quarantine", "--permits", strconv.Itoa(n), "--ttl", "10m", "--owner", owner,
				nodes, key, "--", "sh", "-c", opsHoldScript)}
		hs[i] = h
		waitFor(t, 30*time.Second, "the holders of the permits to start", func() bool {
			return fileExists(filepath.Join(h.dir, "held")) || h.p.exited()
		})
		if h.p.exited() {
			t.Fatalf("a holder of a permit ended early:\n%s", h.p.wait())
		}
		b, err := os.ReadFile(filepath.Join(h.dir, "held"))
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(b))
		if len(f) != 3 {
			t.Fatalf("the command's environment is incomplete: %q", b)
		}
		var err1, err2 error
		h.slot, err1 = strconv.Atoi(f[0])
		h.fence, err2 = strconv.ParseInt(f[1], 10, 64)
		h.id = f[2]
		if err1 != nil || err2 != nil || len(h.id) != 12 {
			t.Fatalf("REDLOCK_SLOT, REDLOCK_FENCE or REDLOCK_LOCK_ID is not what it should be: %q", b)
		}
	}
	return hs
}

// stop ends the holder's command and returns what the run did.
func (h *opsHolder) stop(t *testing.T) result {
	t.Helper()
	if err := os.WriteFile(filepath.Join(h.dir, "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return h.p.wait()
}

// Inspect --permits of a semaphore with 2 of its 3 permits held by
// 'redlock run --permits': the verdict, each held slot's holder and owner,
// the free slot, as text and JSON; then refusals on one slot and too few
// nodes, and the usage errors.
func TestInspectPermits(t *testing.T) {
	t.Parallel()
	srv := redistest.StartN(t, 3, redistest.Config{})
	nodes := nodesFlag(srv...)

	expect(t, run(t, "inspect", "--permits", "3", nodes, "pool"), 0,
		`semaphore "pool": 0 of 3 permits held; 3 free`, "slots 0, 1, 2: FREE")

	hs := startHolders(t, nodes, "pool", 3, "ops-a", "ops-b")
	if hs[0].slot == hs[1].slot || hs[0].id == hs[1].id {
		t.Fatalf("two permits share slot %d or ID %s", hs[0].slot, hs[0].id)
	}
	slices.SortFunc(hs, func(a, b *opsHolder) int { return a.slot - b.slot })
	free := 3 - hs[0].slot - hs[1].slot // the slot neither holds: 0+1+2 = 3

	want := []string{
		fmt.Sprintf(`semaphore "pool": 2 of 3 permits held (slots %d, %d); 1 free`, hs[0].slot, hs[1].slot),
		fmt.Sprintf("slot %d: FREE", free),
		"NODE", "OWNER",
	}
	for _, h := range hs {
		want = append(want, fmt.Sprintf(`slot %d: HELD by %s ("%s") on `, h.slot, h.id, h.owner))
	}
	r := run(t, "inspect", "--no-quarantine", "--permits", "3", nodes, "pool")
	expect(t, r, 0, want...)
	if strings.Contains(r.stdout, fmt.Sprintf("slot %d: HELD", free)) || strings.Contains(r.stdout, `lock "`) {
		t.Fatalf("inspect --permits shows the free slot's report, or a lock's:\n%s", r)
	}
	expect(t, run(t, "status", "--no-quarantine", "--permits", "3", nodes, "pool"), 0, want...)

	r = run(t, "inspect", "--permits", "3", "--json", nodes, "pool")
	expect(t, r, 0)
	rep := parseJSON[semaphoreReport](t, r)
	if rep.Key != "pool" || rep.Permits != 3 || rep.Held != 2 || rep.Free != 1 || len(rep.Slots) != 3 {
		t.Fatalf("inspect --permits --json: unexpected report:\n%s", r)
	}
	for i, s := range rep.Slots {
		if s.Slot != i || s.Key != wire.PermitKey("pool", i) || s.Quorum != 2 || s.Answered != 3 || len(s.Nodes) != 3 {
			t.Fatalf("inspect --permits --json: slot %d is not the slot's report:\n%s", i, r)
		}
	}
	for _, h := range hs {
		s := rep.Slots[h.slot]
		if s.State != "held" || s.Holder != h.id || s.Owner != h.owner || s.HeldOn < 2 || s.TTLMillis <= 0 || s.Fence < h.fence {
			t.Fatalf("inspect --permits --json: slot %d is not held by %s (%q):\n%s", h.slot, h.id, h.owner, r)
		}
	}
	if s := rep.Slots[free]; s.State != "free" || s.Holder != "" || s.HeldOn != 0 {
		t.Fatalf("inspect --permits --json: slot %d is not free:\n%s", free, r)
	}
	for _, h := range hs {
		expect(t, h.stop(t), 0)
	}
	expect(t, run(t, "inspect", "--permits", "3", nodes, "pool"), 0, `semaphore "pool": 0 of 3 permits held; 3 free`)

	// A slot holding another type of value on two nodes of three: that
	// slot cannot be told, and the refusals set the exit status.
	for _, s := range srv[:2] {
		s.MustDo(t, "HSET", wire.PermitKey("wt", 1), "f", "v")
	}
	expect(t, run(t, "inspect", "--permits", "2", nodes, "wt"), exitConfig,
		`semaphore "wt": 0 of 2 permits held; 1 free; 1 unknown (slot 1)`, "slot 1: UNKNOWN", "WRONGTYPE", "slot 0: FREE")
	r = run(t, "inspect", "--permits", "2", "--json", nodes, "wt")
	expect(t, r, exitConfig)
	if rep := parseJSON[semaphoreReport](t, r); rep.Held != 0 || rep.Free != 1 || rep.Slots[0].State != "free" || rep.Slots[1].State != "unknown" {
		t.Fatalf("inspect --permits --json of a slot of another type: unexpected report:\n%s", r)
	}

	// Usage errors.
	for _, n := range []string{"0", "-1", strconv.Itoa(wire.MaxPermits + 1)} {
		expect(t, run(t, "inspect", "--permits", n, nodes, "pool"), exitUsage,
			fmt.Sprintf("--permits %s: a semaphore has from 1 to %d permits", n, wire.MaxPermits))
	}
	expect(t, run(t, "inspect", nodes, wire.PermitKey("pool", 0)), exitUsage, "reserved", "--permits N")
	expect(t, run(t, "inspect", "--permits", "2", nodes, wire.PermitKey("pool", 0)), exitUsage, "reserved")

	// Two nodes of three down: no slot can be told.
	for _, s := range srv[1:] {
		if err := s.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	expect(t, run(t, "inspect", "--permits", "3", nodes, "pool"), exitUnavailable,
		`semaphore "pool": 0 of 3 permits held; 0 free; 3 unknown (slots 0, 1, 2)`, "slot 2: UNKNOWN: only 1 of 3 nodes answered")
}

// Release --force --permits --slot frees a permit that a 'redlock run
// --permits' holds with a TTL of minutes: a run waiting for a permit of the
// full semaphore gets that slot, with a greater fence. The flags that name
// a slot are checked first.
func TestReleasePermit(t *testing.T) {
	t.Parallel()
	srv := redistest.StartN(t, 3, redistest.Config{})
	nodes := nodesFlag(srv...)
	hs := startHolders(t, nodes, "jobs", 3, "ops-a", "ops-b", "ops-c")
	a, b := hs[0], hs[1]

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--slot", "1"}, `--slot 1 needs --permits N, the number of permits of the semaphore "jobs"`},
		{[]string{"--permits", "3"}, `--permits 3 needs --slot I, the slot of the semaphore "jobs" to free, from 0 to 2`},
		{[]string{"--permits", "3", "--slot", "3"}, `--slot 3: the semaphore "jobs" of 3 permits has slots 0 to 2`},
		{[]string{"--permits", "3", "--slot", "-1"}, `--slot -1: the semaphore "jobs" of 3 permits has slots 0 to 2`},
		{[]string{"--permits", "0", "--slot", "0"}, "--permits 0: a semaphore has from 1 to"},
	} {
		args := append(append([]string{"release", "--force", "--yes"}, tc.args...), nodes, "jobs")
		expect(t, run(t, args...), exitUsage, tc.want, "redlock release --help")
	}
	expect(t, run(t, "release", "--permits", "3", "--slot", "0", nodes, "jobs"), exitUsage, "only with --force")
	expect(t, run(t, "release", "--force", "--permits", "3", "--slot", "0", nodes, "jobs"), exitUsage,
		`cannot ask before removing the permit in slot 0 of the semaphore "jobs"`, "--yes")
	expect(t, run(t, "release", "--force", "--yes", nodes, wire.PermitKey("jobs", 0)), exitUsage,
		"reserved", "--permits N --slot I")
	expect(t, run(t, "inspect", "--permits", "3", nodes, "jobs"), 0, `semaphore "jobs": 3 of 3 permits held (slots 0, 1, 2); 0 free`)

	// A run that waits for a permit: every slot is held for minutes.
	wdir := t.TempDir()
	w := start(t, wdir, nil, "run", "--no-quarantine", "--permits", "3", "--wait", "60s", nodes, "jobs", "--",
		"sh", "-c", `echo "slot=$REDLOCK_SLOT fence=$REDLOCK_FENCE"`)
	waitFor(t, 30*time.Second, "the waiting run to say why it waits", func() bool {
		return strings.Contains(w.stderr.String(), `all 3 permits are held by others`) || w.exited()
	})
	if w.exited() {
		t.Fatalf("the run ended while every permit was held:\n%s", w.wait())
	}

	r := run(t, "release", "--force", "--yes", "--permits", "3", "--slot", strconv.Itoa(a.slot), "--json", nodes, "jobs")
	expect(t, r, 0)
	rep := parseJSON[releaseReport](t, r)
	if rep.Key != "jobs" || rep.Permits != 3 || rep.Slot == nil || *rep.Slot != a.slot || !rep.Released ||
		rep.Removed < 2 || rep.Confirmed != 3 || rep.FenceFloor < a.fence {
		t.Fatalf("release --permits --json: unexpected report:\n%s", r)
	}
	removedA := 0
	for _, n := range rep.Nodes {
		if n.Removed && n.Holder == a.id && n.Owner == a.owner && n.TTLMillis > 0 {
			removedA++
		}
	}
	if removedA < 2 {
		t.Fatalf("release --permits --json: the holder's key was not removed from a quorum:\n%s", r)
	}

	// Only the release can have let the waiting run in: the permit it
	// freed had minutes to go.
	// It must keep its permit: a removal that reaches a node after the
	// run's grant there (late, or sent again) leaves a grant whose fence
	// exceeds the floor alone.
	rw := w.wait()
	expect(t, rw, 0, fmt.Sprintf("slot=%d fence=", a.slot))
	_, after, _ := strings.Cut(rw.stdout, "fence=")
	next, err := strconv.ParseInt(strings.TrimSpace(after), 10, 64)
	// The floor is read back after the release, when the waiting run may
	// already hold the slot: it is not always below the run's fence.
	if err != nil || next <= a.fence {
		t.Fatalf("the next holder's fence %q is not above the removed holder's %d:\n%s", after, a.fence, rw)
	}

	// The text report, for another slot; then nothing left there.
	expect(t, run(t, "release", "--force", "-y", "--permits", "3", "--slot", strconv.Itoa(b.slot), nodes, "jobs"), 0,
		fmt.Sprintf(`slot %d of the semaphore "jobs": REMOVED the keys of `, b.slot), b.id, "ops-b",
		"the permit can be taken again", "fence floor: ", "extends the permit")
	expect(t, run(t, "release", "--force", "-y", "--permits", "3", "--slot", strconv.Itoa(b.slot), nodes, "jobs"), 0,
		fmt.Sprintf(`slot %d of the semaphore "jobs": nothing to remove`, b.slot))
	expect(t, run(t, "inspect", "--permits", "3", nodes, "jobs"), 0,
		fmt.Sprintf(`semaphore "jobs": 1 of 3 permits held (slot %d); 2 free`, hs[2].slot))

	// The holders whose permits were removed are not stopped by it; the
	// third releases its own.
	a.stop(t)
	b.stop(t)
	expect(t, hs[2].stop(t), 0)

	// Too few nodes: nothing is released.
	for _, s := range srv[:2] {
		s.MustDo(t, "SET", wire.PermitKey("jobs", 1), "crashed-token batch 7", "PX", "3600000")
	}
	if err := srv[1].Kill(); err != nil {
		t.Fatal(err)
	}
	if err := srv[2].Kill(); err != nil {
		t.Fatal(err)
	}
	r = run(t, "release", "--force", "-y", "--json", "--permits", "3", "--slot", "1", nodes, "jobs")
	expect(t, r, exitUnavailable, `the permit in slot 1 of the semaphore "jobs" was not released: only 1 of 3 nodes confirmed`)
	if rep := parseJSON[releaseReport](t, r); rep.Released || rep.Confirmed != 1 || rep.Slot == nil || *rep.Slot != 1 {
		t.Fatalf("release --permits --json with two nodes down: unexpected report:\n%s", r)
	}
}

// On a terminal, release --force --permits --slot shows the slot and
// frees it only when the answer is yes.
func TestReleasePermitAsks(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Config{})
	nodes := nodesFlag(srv)
	key := wire.PermitKey("asks", 1)
	srv.MustDo(t, "SET", key, "hung-token cron on db-2", "PX", "3600000")

	keyboard, tty := openTerminal(t)
	if _, err := keyboard.WriteString("n\n"); err != nil {
		t.Fatal(err)
	}
	r := startWith(t, t.TempDir(), tty, nil, "release", "--force", "--permits", "2", "--slot", "1", nodes, "asks").wait()
	expect(t, r, exitFailure, `slot 1 of the semaphore "asks": HELD by `+tokenID("hung-token"), "cron on db-2",
		`Remove the permit in slot 1 of the semaphore "asks" from every node, whatever holds it? [y/N]`, "not answered yes")
	if v := srv.MustDo(t, "GET", key); v == nil {
		t.Fatalf("answered no, and the permit was removed:\n%s", r)
	}

	keyboard, tty = openTerminal(t)
	if _, err := keyboard.WriteString("y\n"); err != nil {
		t.Fatal(err)
	}
	r = startWith(t, t.TempDir(), tty, nil, "release", "--force", "--permits", "2", "--slot", "1", nodes, "asks").wait()
	expect(t, r, 0, "[y/N]", `slot 1 of the semaphore "asks": REMOVED the keys of `+tokenID("hung-token"))
	if v := srv.MustDo(t, "GET", key); v != nil {
		t.Fatalf("answered yes, and the permit is still there: %v\n%s", v, r)
	}
}
