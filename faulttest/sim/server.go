package sim

import (
	"bufio"
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	mserver "github.com/alicebob/miniredis/v2/server"
)

// A server is one simulated redis-server process and its data: a
// miniredis store that runs the real Lua scripts, in front of which the
// server answers what the scripts ask of the process the way Redis 7
// does (TIME by the server's own clock, INFO server and replication,
// LASTSAVE), and takes the faults of a process: a crash that loses its
// data, a restart from its last snapshot, the promotion of a lagging
// replica, a pause, a clock that steps or drifts, BUSY and LOADING
// replies.
//
// A server runs one command at a time, as Redis does; mu orders them.
type server struct {
	id int
	mu sync.Mutex

	m     *miniredis.Miniredis
	epoch int // counts the processes: a new one after every crash, restart or promotion

	// The server's clock: at virtual time base it read nodeBase, and it
	// runs at rate node seconds a virtual second.
	base, nodeBase time.Time
	rate           float64

	now        time.Time // the node clock of the command being run
	runID      string
	started    time.Time // the node clock at the process's start
	lastsave   int64     // unix seconds of the node clock
	replid     string
	replid2    string
	secondRepl int64 // second_repl_offset; -1 when not promoted
	writes     int64 // master_repl_offset, roughly: one per script run

	subs     map[string][]chan<- struct{} // PUBLISH's subscribers, by channel, in the order they came
	wentBack bool                         // the clock has stepped back
	down     time.Time                    // until then the process is not running: connections are refused
	paused   time.Time                    // until then the process is stopped (SIGSTOP): requests wait
	queued   int                          // requests that came during the pause, so far
	loading  time.Time                    // until then every command answers LOADING
	snapshot *image                       // the last save, for a restart from it
	replica  *image                       // the lagging replica's copy, for a promotion
	newID    func(prefix string) string
	dbs      int
	buf      bytes.Buffer
	w        *bufio.Writer
	rd       *bufio.Reader         // reads buf
	peers    map[int]*mserver.Peer // by database, for this process
	scripts  map[string]*compiled  // by SHA-1: the scripts this process has run, for EVALSHA
}

// An image is a copy of a server's data, as an RDB file or a replica has
// it: the keys of each database with their values and expiry times on
// the node's clock, and the identity a restart from it takes back.
type image struct {
	at      time.Time // node clock
	replid  string
	offset  int64
	entries [][]entry // by database
}

type entry struct {
	key     string
	typ     string
	str     string
	hash    map[string]string
	zset    map[string]float64
	expires time.Time // zero: no expiry
}

func newServer(id, dbs int, now time.Time, newID func(string) string) *server {
	s := &server{id: id, dbs: dbs, base: now, nodeBase: now, rate: 1, newID: newID}
	s.w = bufio.NewWriter(&s.buf)
	s.rd = bufio.NewReader(&s.buf)
	s.boot(now, nil)
	s.replica = s.image()
	return s
}

// nodeNow reads the server's clock at virtual time now.
func (s *server) nodeNow(now time.Time) time.Time {
	d := float64(now.Sub(s.base)) * s.rate
	return s.nodeBase.Add(time.Duration(d))
}

// setClock steps the server's clock by step and sets its rate.
func (s *server) setClock(now time.Time, step time.Duration, rate float64) {
	s.nodeBase = s.nodeNow(now).Add(step)
	s.base = now
	s.rate = rate
}

// boot starts a new process with the data of img (nil: empty).
func (s *server) boot(now time.Time, img *image) {
	if s.m != nil {
		s.m.Close()
	}
	s.epoch++
	s.m = miniredis.NewMiniRedis()
	s.m.ClockTTL(true)
	node := s.nodeNow(now)
	s.m.SetTime(node)
	c, err := s.m.Dial() // starts the in-process server that Dispatch runs on
	if err == nil {
		c.Close()
	}
	s.m.Server().SetPreHook(s.hook)
	s.peers = make(map[int]*mserver.Peer)
	s.scripts = nil
	s.runID = s.newID("run")
	s.started = node
	s.lastsave = node.Unix() // Redis sets LASTSAVE to its start
	s.secondRepl = -1
	s.replid2 = strings.Repeat("0", 40)
	if img != nil {
		s.restore(img, node)
		s.replid = img.replid
		s.writes = img.offset
	} else {
		s.replid = s.newID("repl")
		s.writes = 0
	}
}

// hook answers, for the scripts and for clients alike, what miniredis
// answers otherwise than Redis 7: TIME by the server's clock, INFO and
// LASTSAVE of this process. It runs with the server's mu held (see
// dispatch), so it reads the fields without locking.
func (s *server) hook(c *mserver.Peer, cmd string, args ...string) bool {
	switch cmd {
	case "TIME":
		us := s.now.UnixMicro()
		c.WriteLen(2)
		c.WriteBulk(strconv.FormatInt(us/1e6, 10))
		c.WriteBulk(strconv.FormatInt(us%1e6, 10))
		return true
	case "LASTSAVE":
		c.WriteInt(int(s.lastsave))
		return true
	case "PUBLISH":
		n := 0
		if len(args) > 0 {
			for _, wake := range s.subs[args[0]] {
				n++
				select {
				case wake <- struct{}{}:
				default:
				}
			}
		}
		c.WriteInt(n)
		return true
	case "INFO":
		c.WriteBulk(s.info(args))
		return true
	}
	return false
}

// info returns the text of INFO for sections (all when none), with the
// fields of the sections server and replication that Redis 7 gives and
// the scripts read.
func (s *server) info(sections []string) string {
	want := func(name string) bool {
		if len(sections) == 0 {
			return true
		}
		for _, x := range sections {
			x = strings.ToLower(x)
			if x == name || x == "all" || x == "default" || x == "everything" {
				return true
			}
		}
		return false
	}
	// Built by hand, not by fmt: the scripts ask for it on most runs.
	var b []byte
	if want("server") {
		up := int64(s.now.Sub(s.started) / time.Second)
		b = append(b, "# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\nprocess_id:"...)
		b = strconv.AppendInt(b, int64(1000+s.id), 10)
		b = append(b, "\r\nrun_id:"...)
		b = append(b, s.runID...)
		b = append(b, "\r\nuptime_in_seconds:"...)
		b = strconv.AppendInt(b, up, 10)
		b = append(b, "\r\nuptime_in_days:"...)
		b = strconv.AppendInt(b, up/86400, 10)
		b = append(b, "\r\n"...)
	}
	if want("replication") {
		if len(b) > 0 {
			b = append(b, "\r\n"...)
		}
		b = append(b, "# Replication\r\nrole:master\r\nconnected_slaves:0\r\nmaster_failover_state:no-failover\r\nmaster_replid:"...)
		b = append(b, s.replid...)
		b = append(b, "\r\nmaster_replid2:"...)
		b = append(b, s.replid2...)
		b = append(b, "\r\nmaster_repl_offset:"...)
		b = strconv.AppendInt(b, s.writes, 10)
		b = append(b, "\r\nsecond_repl_offset:"...)
		b = strconv.AppendInt(b, s.secondRepl, 10)
		b = append(b, "\r\nrepl_backlog_active:0\r\n"...)
	}
	return string(b)
}

// A reply is what a command answered: the value as a driver.Node returns
// it, or the error reply's text.
type reply struct {
	val any
	err string
}

// dispatch runs args (a command) on database db at virtual time now, as a
// connection of the current process would, and returns the reply.
func (s *server) dispatch(now time.Time, db int, args []string) reply {
	s.now = s.nodeNow(now)
	s.m.SetTime(s.now)
	switch cmd := strings.ToUpper(args[0]); cmd {
	case "EVAL", "EVALSHA":
		return s.eval(db, cmd == "EVALSHA", args[1:])
	}
	r, err := s.do(db, args)
	if err != nil {
		return reply{err: strings.TrimSpace(err.Error())}
	}
	return reply{val: convert(r)}
}

// do runs one command on database db of the miniredis store, through the
// server's front (see hook), and returns its parsed reply, or the error
// reply as an error.
func (s *server) do(db int, args []string) (any, error) {
	p := s.peers[db]
	if p == nil {
		p = mserver.NewPeer(s.w)
		s.peers[db] = p
		if db != 0 {
			s.m.Server().Dispatch(p, []string{"SELECT", fmt.Sprint(db)})
			s.w.Flush()
			s.buf.Reset()
		}
	}
	s.m.Server().Dispatch(p, args)
	s.w.Flush()
	s.rd.Reset(&s.buf)
	r, err := mserver.ParseReply(s.rd)
	s.buf.Reset()
	return r, err
}

// convert turns a parsed RESP reply into the shapes driver.Node.Eval
// returns.
func convert(r any) any {
	switch r := r.(type) {
	case []any:
		for i := range r {
			r[i] = convert(r[i])
		}
		return r
	case []byte:
		return string(r)
	case mserver.Simple:
		return string(r)
	case int:
		return int64(r)
	}
	return r
}

// image copies the server's data as it stands: a save, or the state a
// replica has.
func (s *server) image() *image {
	img := &image{at: s.now, replid: s.replid, offset: s.writes}
	if img.at.IsZero() {
		img.at = s.started
	}
	for i := 0; i < s.dbs; i++ {
		db := s.m.DB(i)
		var es []entry
		for _, k := range db.Keys() {
			e := entry{key: k, typ: db.Type(k)}
			switch e.typ {
			case "string":
				e.str, _ = db.Get(k)
			case "hash":
				e.hash = make(map[string]string)
				fields, _ := db.HKeys(k)
				for _, f := range fields {
					e.hash[f] = db.HGet(k, f)
				}
			case "zset":
				e.zset = make(map[string]float64)
				ms, _ := db.ZMembers(k)
				for _, m := range ms {
					e.zset[m], _ = db.ZScore(k, m)
				}
			default:
				continue
			}
			if ttl := db.TTL(k); ttl > 0 {
				e.expires = img.at.Add(ttl)
			}
			es = append(es, e)
		}
		img.entries = append(img.entries, es)
	}
	return img
}

// lost returns the entries of cur, the data as it stands, that expire and
// have not yet expired, and that kept (what the process starts again
// with; nil: nothing) does not hold as they are: the locks, readers,
// permits and terms that a crash, a restart from kept or a promotion to
// kept would lose. Entries without an expiry (markers, counters) are not
// locks.
func lost(cur, kept *image) []entry {
	var out []entry
	for db, es := range cur.entries {
		for _, e := range es {
			if e.expires.IsZero() || !e.expires.After(cur.at) {
				continue
			}
			if kept != nil && db < len(kept.entries) && slices.ContainsFunc(kept.entries[db], func(k entry) bool { return covers(k, e) }) {
				continue
			}
			out = append(out, e)
		}
	}
	return out
}

// covers reports whether entry k holds what e holds: the same string, the
// members of e's sorted set, the fields of e's hash.
func covers(k, e entry) bool {
	if k.key != e.key || k.typ != e.typ {
		return false
	}
	switch e.typ {
	case "string":
		return k.str == e.str
	case "zset":
		for m := range e.zset {
			if _, ok := k.zset[m]; !ok {
				return false
			}
		}
	case "hash":
		for f, v := range e.hash {
			if k.hash[f] != v {
				return false
			}
		}
	}
	return true
}

// restore loads img into the fresh store at node time now, leaving out
// the keys that have expired since, as Redis does loading an RDB file.
func (s *server) restore(img *image, now time.Time) {
	for i, es := range img.entries {
		db := s.m.DB(i)
		for _, e := range es {
			var ttl time.Duration
			if !e.expires.IsZero() {
				ttl = e.expires.Sub(now)
				if ttl <= 0 {
					continue
				}
			}
			switch e.typ {
			case "string":
				db.Set(e.key, e.str)
			case "hash":
				for f, v := range e.hash {
					db.HSet(e.key, f, v)
				}
			case "zset":
				for m, sc := range e.zset {
					db.ZAdd(e.key, sc, m)
				}
			}
			if ttl > 0 {
				db.SetTTL(e.key, ttl)
			}
		}
	}
}

// save takes a snapshot now, as BGSAVE would, and moves LASTSAVE.
func (s *server) save(now time.Time) {
	s.now = s.nodeNow(now)
	s.m.SetTime(s.now)
	s.snapshot = s.image()
	s.lastsave = s.now.Unix()
}

// sync brings the lagging replica's copy up to date with the data as it
// stands: the writes after the last sync are the ones a promotion loses.
func (s *server) sync(now time.Time) {
	s.now = s.nodeNow(now)
	s.m.SetTime(s.now)
	s.replica = s.image()
}

// crash kills the process; it starts again, empty, after down.
func (s *server) crash(now time.Time, down time.Duration) {
	s.boot(now, nil)
	s.down = now.Add(down)
}

// restartFromSnapshot kills the process; it starts again after down with
// the data of its last save (empty if it never saved).
func (s *server) restartFromSnapshot(now time.Time, down time.Duration) {
	s.boot(now.Add(down), s.snapshot)
	s.down = now.Add(down)
}

// promote replaces the master with its lagging replica, which has the data
// of the last sync: a new replication ID, the old one as replid2 and
// second_repl_offset set, a process that has been up all along.
func (s *server) promote(now time.Time) {
	old, offset, started := s.replid, s.writes, s.started
	img := s.replica
	s.boot(now, img)
	s.started = started // the replica's process was not started now
	s.replid2 = old
	s.secondRepl = offset + 1
	s.replid = s.newID("repl")
	s.writes = offset
}
