package sim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/faulttest/history"
)

// A Config says what one history is made of. Run draws everything else
// from the seed.
type Config struct {
	Seed uint64
	// Ops is the least number of operations the workload makes, Faults
	// the least number of faults injected.
	Ops, Faults int
	// MessageFaults is the chance that a message is delayed past the node
	// timeout, half of it that it is lost or duplicated.
	MessageFaults float64
	// NodeTimeout scales the delays of messages (the client's own node
	// timeout is a tenth of the TTL, at most 250ms).
	NodeTimeout time.Duration
	// Canary breaks an assumption of the library's guarantees, so that
	// the checker must fire (see Canaries); "" for a safe run.
	Canary string
	// Trace, when set, is given a line for every request a server runs:
	// when, the client and entry, the script, its keys and arguments,
	// and the reply. It is for reading one replayed history.
	Trace func(line string)
}

// Canaries lists the assumptions a run can break on purpose: a history
// with one of them must end in a violation, which shows that the
// simulator can see it.
var Canaries = []string{
	"quarantine-off", // Options.DisableQuarantine, with nodes that restart empty
	"no-drift",       // a drift allowance of almost nothing, with node clocks that run fast within the default's
}

// DefaultConfig returns the configuration of the histories that CI runs.
func DefaultConfig(seed uint64) Config {
	return Config{Seed: seed, Ops: 100, Faults: 5, MessageFaults: 0.01, NodeTimeout: 50 * time.Millisecond}
}

// A Result is one history and the checker's verdict on it.
type Result struct {
	Seed       uint64
	History    *history.History
	Violations []history.Violation
	Ops        int    // operations made
	Faults     int    // faults injected
	Hash       string // of the history, without its random tokens: equal for a replay
	Topology   string
	Took       time.Duration // virtual time
}

// Schedule returns the faults of the history, one a line.
func (r *Result) Schedule() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", r.Topology)
	for _, f := range r.History.Faults {
		who := fmt.Sprintf("node %d", f.Node)
		if f.Client != "" {
			who += " " + f.Client
		}
		fmt.Fprintf(&b, "  %v %s %s %s\n", f.At, f.Kind, who, f.Detail)
	}
	return b.String()
}

// A world is one history being made: its servers, clients and recorder.
type world struct {
	seed     uint64
	cfg      Config
	rng      *rand.Rand // the chaos goroutine's: faults and topology
	h        *history.History
	servers  []*server
	links    [][]*link // by client, by entry
	entries  []entry0  // the entries every client is given
	inflight sync.WaitGroup
	ids      int

	mu     sync.Mutex
	ops    int
	faults int
	gc     []bool      // by worker: its next hold pauses past its validity
	exited []bool      // by worker: it has made its last operation
	after  []time.Time // by worker: when it starts afresh after a restart of a majority (see afterRestart)
	twice  int         // the server given as two entries; -1 if none
	forced []forced    // by client: the servers its ForceRelease under way ran on
	opts   redlock.Options
	maxTTL time.Duration

	quietEnd time.Time     // when the client cut from the second entry of the server given twice reaches it
	majority []int         // the servers of the crash of a majority being made
	longest  time.Duration // the life left to the longest lock held at that crash
	longKey  string        // that lock's key
	// held records, for each token a lock key has held, the servers on
	// which some key held it (see ran and granted).
	held map[string]map[int]bool
}

// tokenOf returns the token of a lock key's value: the part before the
// owner's label.
func tokenOf(v string) string {
	tok, _, _ := strings.Cut(v, " ")
	return tok
}

// granted reports whether a key that holds v may be a valid lock's: a
// token that some key held on a quorum of the servers at some moment, or
// one the simulator did not see written. A lock held on fewer servers than
// that was never granted by a round that counts one vote per server, and
// the client's guarantees do not cover keeping it (see spares).
func (w *world) granted(v string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	on, ok := w.held[tokenOf(v)]
	return !ok || len(on) >= len(w.servers)/2+1
}

// entry0 is one node entry: a server and a database on it.
type entry0 struct {
	server, db int
	name       string
}

// newID draws an identifier for a process or a replication history.
func (w *world) newID(prefix string) string {
	w.ids++
	sum := sha256.Sum256([]byte(fmt.Sprintf("%d/%s/%d", w.seed, prefix, w.ids)))
	return hex.EncodeToString(sum[:20])
}

// Run makes the history of cfg and judges it. It must run inside a
// testing/synctest bubble: every sleep in it is virtual.
func Run(cfg Config) *Result {
	w := &world{seed: cfg.Seed, cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0x5117)), held: map[string]map[int]bool{}}
	servers := 3
	if w.rng.IntN(3) == 0 {
		servers = 5
	}
	twice := w.rng.IntN(2) == 0 // one server given as two entries
	if w.rng.IntN(4) == 0 {
		// Two servers, one of them given twice: three entries, a quorum
		// of two, which one server counted twice would make alone.
		servers, twice = 2, true
	}
	w.h = history.NewHistory(fmt.Sprintf("sim seed %d", cfg.Seed), 0)
	w.h.RemovalsUnfenced = true // see SAFETY.md: the fault suite judges fences across a ForceRelease
	now := time.Now()
	for i := range servers {
		// Each process has been up a minute when the history begins.
		s := newServer(i, 2, now, w.newID)
		s.started = s.started.Add(-time.Minute)
		w.servers = append(w.servers, s)
	}
	for i := range servers {
		w.entries = append(w.entries, entry0{server: i, name: fmt.Sprintf("s%d:6379/0", i)})
	}
	w.twice = -1
	if twice {
		s := w.rng.IntN(servers)
		w.twice = s
		// Another database of the server, or the same one through a
		// relay (another address): either way one server, one vote.
		e := entry0{server: s, db: 1, name: fmt.Sprintf("s%d:6379/1", s)}
		if w.rng.IntN(2) == 0 {
			e = entry0{server: s, name: fmt.Sprintf("s%d-relay:6380/0", s)}
		}
		w.entries = append(w.entries, e)
	}
	// The checker's quorum check counts servers: the samples are taken
	// one a server (see sample).
	w.h.Nodes = len(w.servers)
	w.h.Quorum = len(w.servers)/2 + 1
	topo := fmt.Sprintf("%d servers, entries %v", servers, names(w.entries))

	// Node clocks: ahead of the clients by less than the shortest TTL
	// (A4), running within the default drift allowance (A1).
	for _, s := range w.servers {
		s.setClock(now, time.Duration(w.rng.Int64N(int64(200*time.Millisecond))), 1+(w.rng.Float64()-0.5)*0.006)
	}
	// The clients' logs (a node sitting out its quarantine, and so on)
	// would be most of the output of a search.
	w.opts.Logger = slog.New(slog.DiscardHandler)
	switch cfg.Canary {
	case "quarantine-off":
		w.opts.DisableQuarantine = true
	case "no-drift":
		w.opts.DriftFactor = 1e-9
		w.opts.MinDrift = time.Nanosecond
		// The servers' clocks run fast, each by up to 0.5%: within the
		// default allowance of 1%, beyond one of almost nothing.
		for _, s := range w.servers {
			s.setClock(now, 0, 1.002+w.rng.Float64()*0.003)
		}
	}
	if cfg.Canary != "" {
		topo += ", canary " + cfg.Canary
	}
	w.maxTTL = 3 * time.Second

	const workers = 4
	w.gc = make([]bool, workers)
	w.exited = make([]bool, workers)
	w.after = make([]time.Time, workers)
	w.forced = make([]forced, 2*workers)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	w.links = make([][]*link, 2*workers)
	var ks []*worker
	for i := range workers {
		ks = append(ks, w.newWorker(i))
	}
	if w.twice >= 0 {
		// One client cannot reach the second entry of the server given
		// twice at first: it hears that server's identity from one entry
		// only, and later from the other, perhaps after a restart.
		l := w.links[w.rng.IntN(len(w.links))][len(w.entries)-1]
		l.quiet = now.Add(time.Duration(w.rng.Int64N(int64(2 * time.Second))))
		w.quietEnd = l.quiet
		w.fault(history.FaultBlackhole, l.entry, fmt.Sprint("c", l.client), fmt.Sprintf("at the start, for %v", l.quiet.Sub(now)))
	}
	for _, k := range ks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k.run(ctx)
		}()
	}
	chaosDone := make(chan struct{})
	go func() {
		defer close(chaosDone)
		w.chaos(ctx)
	}()
	<-chaosDone
	finished := make(chan struct{})
	go func() {
		// Once the history has what it needs, workers still in an
		// operation get a while to end it, then their context ends.
		select {
		case <-finished:
			return
		case <-time.After(2 * time.Minute):
		}
		stop()
	}()
	wg.Wait()
	close(finished)
	stop()
	w.inflight.Wait()

	res := &Result{Seed: cfg.Seed, History: w.h, Ops: w.ops, Faults: w.faults, Topology: topo, Took: time.Since(now)}
	slices.SortFunc(w.h.Ops, func(a, b *history.Op) int { return a.ID - b.ID })
	res.Violations = history.Check(w.h)
	res.Hash = hashOf(w.h)
	return res
}

func names(es []entry0) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.name)
	}
	return out
}

// hashOf hashes the history without what crypto/rand draws (tokens and
// acquisition IDs), which differs from run to run of the same seed.
func hashOf(h *history.History) string {
	type op struct {
		ID       int
		Kind     history.OpKind
		Key      string
		Start    history.Mono
		Return   history.Mono
		OK       bool
		Err      string
		Fence    int64
		Until    history.Mono
		Adopts   int
		Handover history.Mono
		Extends  []history.Extend
		Release  *history.Release
	}
	var ops []op
	for _, o := range h.Ops {
		ops = append(ops, op{o.ID, o.Kind, o.Key, o.Start, o.Return, o.OK, scrub(o.Err), o.Fence, o.Until, o.Adopts, o.Handover, o.Extends, o.Release})
	}
	var rs []history.Removal
	for _, r := range h.Removals {
		r.Holders = nil
		rs = append(rs, r)
	}
	b, _ := json.Marshal(struct {
		Ops      []op
		Faults   []history.Fault
		Removals []history.Removal
	}{ops, h.Faults, rs})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// scrub removes tokens from an error's text.
func scrub(s string) string {
	if i := strings.Index(s, "token"); i >= 0 {
		return s[:i]
	}
	return s
}

// client returns a fresh redlock.Client for worker i, on links of its own.
func (w *world) client(i int, opts redlock.Options) *redlock.Client {
	var nodes []redlock.Node
	var ls []*link
	for e, en := range w.entries {
		l := &link{w: w, srv: w.servers[en.server], db: en.db, name: en.name, client: i, entry: e, seen: make(map[uint64]int)}
		ls = append(ls, l)
		nodes = append(nodes, l)
	}
	w.mu.Lock()
	w.links[i] = ls
	w.mu.Unlock()
	c, err := redlock.New(nodes, &opts)
	if err != nil {
		panic(err)
	}
	return c
}

// fault records a fault injected now.
func (w *world) fault(kind history.FaultKind, node int, client, detail string) {
	w.h.AddFault(kind, node, client, detail)
	w.mu.Lock()
	w.faults++
	w.mu.Unlock()
}

// done reports whether the history has its operations and faults, and
// every worker has made its start afresh after a majority's crash.
func (w *world) done() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, at := range w.after {
		if !at.IsZero() && !w.exited[i] {
			return false // a fresh process is still to come after a majority's crash
		}
	}
	return w.ops >= w.cfg.Ops && w.faults >= w.cfg.Faults
}

// maxHistory bounds a history's virtual time: the chaos ends then, and
// the workers with it, whatever they still wanted.
const maxHistory = 10 * time.Minute

// chaos injects faults at random moments until ctx is done, the history
// has what it needs, or maxHistory has passed.
func (w *world) chaos(ctx context.Context) {
	r := w.rng
	// Faults come at random moments, one about every 100/Faults
	// operations, so that a history has its faults among its operations
	// however long the operations take.
	every := max(w.cfg.Ops/max(w.cfg.Faults, 1), 2)
	mark := 0
	began := time.Now()
	if w.twice >= 0 && r.IntN(2) == 0 {
		// The server given twice restarts while one client cannot reach
		// its second entry yet: that client's probes of its two entries
		// then see two run_ids, one before the restart and one after.
		time.Sleep(time.Duration(r.Int64N(int64(time.Until(w.quietEnd) + 1))))
		s := w.servers[w.twice]
		s.mu.Lock()
		if !s.wentBack && w.spares(time.Now(), w.twice, 0) {
			down := time.Duration(r.Int64N(int64(100 * time.Millisecond)))
			s.crash(time.Now(), down)
			w.fault(history.FaultKill, w.twice, "", "while a client cannot reach its second entry")
			w.fault(history.FaultRestart, w.twice, "", fmt.Sprintf("empty, after %v", down))
		}
		s.mu.Unlock()
	}
	for ctx.Err() == nil && !w.done() && time.Since(began) < maxHistory {
		wait := time.Duration(r.Int64N(int64(300 * time.Millisecond)))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait + time.Duration(r.Int64N(1000))):
		}
		w.mu.Lock()
		ops := w.ops
		w.mu.Unlock()
		if ops < mark {
			continue
		}
		mark = ops + every/2 + r.IntN(every)
		now := time.Now()
		si := r.IntN(len(w.servers))
		if w.twice >= 0 && r.IntN(2) == 0 {
			si = w.twice // the server given twice, whose identity a restart changes
		}
		s := w.servers[si]
		s.mu.Lock()
		k := r.IntN(14)
		if s.wentBack && (k <= 2 || k == 5 || k >= 12) {
			// A node whose clock went back keeps its marker (A4): no
			// crash, restart or promotion may lose it.
			k = 6
		}
		if k == 12 || k == 13 {
			w.majority = r.Perm(len(w.servers))[:len(w.servers)/2+1]
			if w.longest, w.longKey = w.longHeld(now, si); w.longest == 0 {
				// A majority's crash is made while a long lock is held,
				// which the servers that kept it then know of.
				s.mu.Unlock()
				continue
			}
		}
		if !w.spares(now, si, k) {
			// The fault would lose the last copy of a lock, which no
			// rule of the client can see (see spares).
			s.mu.Unlock()
			continue
		}
		switch k {
		case 0, 1: // a crash that loses the data
			down := time.Duration(r.Int64N(int64(500 * time.Millisecond)))
			s.crash(now, down)
			w.fault(history.FaultKill, si, "", "")
			w.fault(history.FaultRestart, si, "", fmt.Sprintf("empty, after %v", down))
			if r.IntN(2) == 0 {
				s.loading = now.Add(down + time.Duration(r.Int64N(int64(200*time.Millisecond))))
			}
		case 12, 13: // a crash of a majority of the servers at once, each restarting empty
			down := time.Duration(r.Int64N(int64(100 * time.Millisecond)))
			for _, j := range w.majority {
				o := w.servers[j]
				if o != s {
					o.mu.Lock()
				}
				if !o.wentBack {
					o.crash(now, down)
					w.fault(history.FaultKill, j, "", "with a majority")
					w.fault(history.FaultRestart, j, "", fmt.Sprintf("empty, after %v", down))
				}
				if o != s {
					o.mu.Unlock()
				}
			}
			w.mu.Lock()
			for i := range w.after {
				// Half within 4s, as issue 39's schedule; half in the
				// second half of the life left to the longest lock held,
				// when the restarted servers are older than its time left.
				d := time.Duration(r.Int64N(int64(longTTL / 2)))
				if i%2 == 1 {
					d = w.longest/2 + time.Duration(r.Int64N(int64(w.longest/2)))
				}
				w.after[i] = now.Add(d)
			}
			w.mu.Unlock()
		case 2: // a restart from the last save
			down := time.Duration(r.Int64N(int64(300 * time.Millisecond)))
			s.restartFromSnapshot(now, down)
			w.fault(history.FaultKill, si, "", "")
			w.fault(history.FaultRestart, si, "", fmt.Sprintf("from the snapshot, after %v", down))
		case 3: // a save
			s.save(now)
			w.fault("save", si, "", "")
		case 4: // the replica catches up
			s.sync(now)
			w.fault(history.FaultReplication, si, "", "replica synced")
		case 5: // the lagging replica is promoted
			s.promote(now)
			w.fault(history.FaultPromote, si, "", "replica promoted, missing the writes since its last sync")
		case 6: // a pause
			d := time.Duration(r.Int64N(int64(w.maxTTL)))
			s.paused, s.queued = now.Add(d), 0
			w.fault(history.FaultPause, si, "", fmt.Sprintf("for %v", d))
		case 7: // the clock's rate changes, within the drift allowance
			rate := 1 + (r.Float64()-0.5)*0.006
			if w.cfg.Canary == "no-drift" {
				rate = 1.002 + r.Float64()*0.003
			}
			var step time.Duration
			if r.IntN(3) == 0 {
				// A step back: safe for exclusion; the fences of a node
				// whose clock went back are safe while it keeps its
				// marker, so no crash empties it afterwards (see below).
				step = -time.Duration(r.Int64N(int64(time.Second)))
			}
			s.setClock(now, step, rate)
			s.wentBack = s.wentBack || step < 0
			w.fault(history.FaultClock, si, "", fmt.Sprintf("step %v, rate %.4f", step, rate))
		case 8, 9: // a link fault
			c := r.IntN(len(w.links))
			w.mu.Lock()
			ls := w.links[c]
			w.mu.Unlock()
			if ls == nil {
				s.mu.Unlock()
				continue
			}
			l := ls[r.IntN(len(ls))]
			d := time.Duration(r.Int64N(int64(time.Second)))
			l.mu.Lock()
			switch r.IntN(3) {
			case 0:
				l.quiet = now.Add(d)
				w.fault(history.FaultBlackhole, l.entry, fmt.Sprint("c", c), fmt.Sprintf("for %v", d))
			case 1:
				l.slow = now.Add(d)
				w.fault(history.FaultLatency, l.entry, fmt.Sprint("c", c), fmt.Sprintf("for %v", d))
			default:
				l.lossy = now.Add(d)
				w.fault(history.FaultDropReply, l.entry, fmt.Sprint("c", c), fmt.Sprintf("lossy for %v", d))
			}
			l.mu.Unlock()
		case 10: // BUSY or LOADING for a while
			d := time.Duration(r.Int64N(int64(300 * time.Millisecond)))
			s.loading = now.Add(d)
			w.fault("loading", si, "", fmt.Sprintf("for %v", d))
		case 11: // a client's long GC pause
			c := r.IntN(len(w.gc))
			w.mu.Lock()
			w.gc[c] = true
			w.mu.Unlock()
			w.fault("client-pause", -1, fmt.Sprint("c", c), "past its validity")
		}
		s.mu.Unlock()
	}
}

// spares reports whether fault k of the chaos (see chaos) on server si,
// which holds si's lock, may be made now: whether every lock that it
// would lose (a lock key, a reader, a permit, a term that has not yet
// expired) is still held, as it is, on some server that the fault does
// not touch. The client's guarantees after a restart without its data
// assume so (SAFETY.md, "Restarts, per hash slot": of the quorum that
// granted a valid lock, some node keeps it): no rule of the client can
// learn of a lock whose every copy is gone, short of an
// Options.Quarantine as long as the longest TTL. A fault that loses no
// data may always be made.
func (w *world) spares(now time.Time, si, k int) bool {
	gone := map[int]*image{} // by server: what it starts again with
	switch k {
	case 0, 1:
		gone[si] = nil
	case 2:
		gone[si] = w.servers[si].snapshot
	case 5:
		gone[si] = w.servers[si].replica
	case 12, 13:
		for _, j := range w.majority {
			if !w.servers[j].wentBack { // not crashed: see chaos
				gone[j] = nil
			}
		}
	default:
		return true
	}
	var losses []entry
	var others []*image
	w.atEach(now, si, func(j int, o *server) {
		cur := o.image()
		if kept, ok := gone[j]; ok {
			losses = append(losses, lost(cur, kept)...)
		} else {
			others = append(others, cur)
		}
	})
	for _, e := range losses {
		if e.typ == "string" && !w.granted(e.str) {
			continue
		}
		held := false
		for _, img := range others {
			for _, es := range img.entries {
				held = held || slices.ContainsFunc(es, func(k entry) bool { return covers(k, e) && k.expires.After(img.at) })
			}
		}
		if !held {
			return false
		}
	}
	return true
}

// atEach calls f for every server in turn, with its mu held and its
// clock read at virtual time now. The caller holds the mu of server si
// already (-1: of none).
func (w *world) atEach(now time.Time, si int, f func(i int, s *server)) {
	for i, s := range w.servers {
		if i != si {
			s.mu.Lock()
		}
		s.now = s.nodeNow(now)
		s.m.SetTime(s.now)
		f(i, s)
		if i != si {
			s.mu.Unlock()
		}
	}
}

// longHeld returns the life left to the longest lock key of the
// workload that some server holds, and the key, if it is longer than the longest short
// TTL: a long lock; 0 if none is. It is called with server si's mu held.
func (w *world) longHeld(now time.Time, si int) (time.Duration, string) {
	var longest time.Duration
	var longKey string
	w.atEach(now, si, func(_ int, o *server) {
		for db := range o.dbs {
			for _, key := range lockKeys {
				if ttl := o.m.DB(db).TTL(key); ttl > longest {
					longest, longKey = ttl, key
				}
			}
		}
	})
	if longest <= ttls[len(ttls)-1] {
		return 0, ""
	}
	return longest, longKey
}

// sample records on op what every server holds under op's keys now, as
// the fault suite's probes do after each acquisition and extension, but
// read from the servers' data, one sample a server: a paused server is
// read too, and a server given twice holds the lock if either of its
// databases does. The checker's quorum check then sees a lock that fewer
// than a quorum of servers hold for as long as it is claimed, as one
// server's votes counted twice would leave it. A reader's hold is not
// sampled (its value is a member of the readers' set).
func (w *world) sample(op *history.Op) {
	if op.Shared() || op.Token == "" {
		return
	}
	now := time.Now()
	at := w.h.At(now)
	for _, key := range op.LockKeys() {
		smp := history.Sample{Key: key}
		w.atEach(now, -1, func(i int, s *server) {
			ns := history.NodeSample{Node: i, Reached: true, At: at}
			for db := range s.dbs {
				store := s.m.DB(db)
				if store.Type(key) != "string" {
					continue
				}
				v, _ := store.Get(key)
				if tok := tokenOf(v); ns.Value == "" || tok == op.Token {
					ns.Value, ns.Expires = tok, 0
					if ttl := store.TTL(key); ttl > 0 {
						ns.Expires = at + history.Mono(float64(ttl)/s.rate)
					}
				}
			}
			smp.Nodes = append(smp.Nodes, ns)
		})
		w.h.Mu.Lock()
		op.Probes = append(op.Probes, smp)
		w.h.Mu.Unlock()
	}
}

// forced records which servers ran one ForceRelease's deletion of key,
// and the holders whose key it deleted there.
type forced struct {
	key     string
	servers map[int]bool
	holders []string
}

// forcing starts the record of client c's ForceRelease of key.
func (w *world) forcing(c int, key string) {
	w.mu.Lock()
	w.forced[c] = forced{key: key, servers: make(map[int]bool)}
	w.mu.Unlock()
}

// ran notes that the script name of client c ran on database db of
// server s without an error reply, and replied val. It runs with s's mu
// held: it notes which tokens the keys hold on s (see granted).
func (w *world) ran(c int, s *server, db int, name string, keys []string, val any) {
	store := s.m.DB(db)
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, k := range keys {
		if store.Type(k) != "string" {
			continue
		}
		v, _ := store.Get(k)
		if tok := tokenOf(v); tok != "" {
			if w.held == nil {
				w.held = map[string]map[int]bool{}
			}
			if w.held[tok] == nil {
				w.held[tok] = map[int]bool{}
			}
			w.held[tok][s.id] = true
		}
	}
	if name != "force" || len(keys) == 0 || c >= len(w.forced) {
		return
	}
	f := &w.forced[c]
	if f.servers == nil || f.key != keys[0] {
		return
	}
	f.servers[s.id] = true
	// The force script's reply begins with 1 and the holder's ID when it
	// deleted a hold.
	if a, ok := val.([]any); ok && len(a) > 1 && a[0] == int64(1) {
		if id, ok := a[1].(string); ok && id != "" && !slices.Contains(f.holders, id) {
			f.holders = append(f.holders, id)
		}
	}
}

// forcedOn returns on how many servers client c's ForceRelease of key ran,
// and whose holds it deleted there, and ends its record.
func (w *world) forcedOn(c int, key string) (servers int, holders []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f := w.forced[c]
	w.forced[c] = forced{}
	if f.key != key {
		return 0, nil
	}
	return len(f.servers), f.holders
}
