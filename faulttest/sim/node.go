package sim

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quorumlock/redlock/driver"
)

// A link is one client's entry for one server: the driver.Node the
// client is given. Each request and each reply travels as a message whose
// fate (its delay, its loss, its duplication) is drawn from the history's
// seed and the message's own content, not from the order in which
// goroutines ask: the same seed then sends the same messages the same way
// whatever the Go scheduler does between events at different instants.
type link struct {
	w      *world
	srv    *server
	db     int
	name   string
	client int // index of the client in world.clients
	entry  int

	mu    sync.Mutex
	seen  map[uint64]int // how often each content was sent
	quiet time.Time      // until then the link loses every message (a partition)
	slow  time.Time      // until then the link delays messages by up to a node timeout
	lossy time.Time      // until then the link loses, delays and duplicates messages often
}

// Name returns the entry's name: the server's address and database.
func (l *link) Name() string { return l.name }

// errRefused is what a request to a server whose process is not running
// gets; errReset what one in flight when its process ended gets.
var (
	errRefused = errors.New("sim: connection refused")
	errReset   = errors.New("sim: connection reset by peer")
)

// fate is what happens to one request and its reply.
type fate struct {
	out, back time.Duration // the delays of the request and of the reply
	lostOut   bool
	lostBack  bool
	dup       bool
	dupAfter  time.Duration
	transient string // "BUSY" or "LOADING": the reply is that error
}

// draw returns the fate of the message with the given content.
func (l *link) draw(script string, keys []string) fate {
	h := fnv.New64a()
	h.Write([]byte(script))
	for _, k := range keys {
		h.Write([]byte{0})
		h.Write([]byte(k))
	}
	sum := h.Sum64()
	now := time.Now()
	l.mu.Lock()
	n := l.seen[sum]
	l.seen[sum] = n + 1
	quiet, slow, lossy := now.Before(l.quiet), now.Before(l.slow), now.Before(l.lossy)
	l.mu.Unlock()
	r := rand.New(rand.NewPCG(l.w.seed^sum, uint64(n)<<32|uint64(l.client)<<16|uint64(l.entry)))
	// Delays are whole nanoseconds drawn from a wide range, so that no two
	// messages arrive at the same instant and the order of events is the
	// order of their times.
	f := fate{
		out:  100*time.Microsecond + time.Duration(r.Int64N(int64(900*time.Microsecond))),
		back: 100*time.Microsecond + time.Duration(r.Int64N(int64(900*time.Microsecond))),
	}
	p := l.w.cfg.MessageFaults
	if lossy {
		p *= 10
	}
	if r.Float64() < p {
		f.out += time.Duration(r.Int64N(int64(l.w.cfg.NodeTimeout * 2)))
	}
	if r.Float64() < p {
		f.back += time.Duration(r.Int64N(int64(l.w.cfg.NodeTimeout * 2)))
	}
	if slow {
		f.out += time.Duration(r.Int64N(int64(l.w.cfg.NodeTimeout)))
	}
	f.lostOut = quiet || r.Float64() < p/2
	f.lostBack = quiet || r.Float64() < p/2
	f.dup = r.Float64() < p/2
	f.dupAfter = time.Duration(r.Int64N(int64(l.w.cfg.NodeTimeout)))
	if r.Float64() < p/4 {
		f.transient = "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSCRIPT."
		if r.IntN(2) == 0 {
			f.transient = "LOADING Redis is loading the dataset in memory"
		}
	}
	return f
}

// Eval sends the script to the server as EVAL over the link, with the
// faults its fate draws, and waits for the reply or for ctx.
func (l *link) Eval(ctx context.Context, script *driver.Script, keys, args []string) (any, error) {
	f := l.draw(script.Name(), keys)
	cmd := make([]string, 0, 3+len(keys)+len(args))
	// EVALSHA first, and EVAL when the process does not know the script
	// (see deliver), as the adapters do.
	cmd = append(cmd, "EVALSHA", script.SHA1(), strconv.Itoa(len(keys)))
	cmd = append(cmd, keys...)
	cmd = append(cmd, args...)
	l.srv.mu.Lock()
	epoch := l.srv.epoch
	l.srv.mu.Unlock()
	done := make(chan reply, 1)
	l.w.inflight.Add(1)
	go l.deliver(cmd, keys, script, epoch, f, f.out, !f.lostBack, done)
	if f.dup {
		l.w.inflight.Add(1)
		go l.deliver(cmd, keys, script, epoch, f, f.out+f.dupAfter, false, nil)
	}
	select {
	case r := <-done:
		if r.val == errRefused || r.val == errReset {
			return nil, r.val.(error)
		}
		if r.err != "" {
			return nil, &driver.ReplyError{Msg: r.err}
		}
		return r.val, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// deliver carries the request cmd to the server after delay, runs it
// there as the server's state allows, and, when answer, carries the reply
// back.
func (l *link) deliver(cmd []string, keys []string, script *driver.Script, epoch int, f fate, delay time.Duration, answer bool, done chan<- reply) {
	defer l.w.inflight.Done()
	if f.lostOut {
		return
	}
	time.Sleep(delay)
	s := l.srv
	var r reply
	for {
		s.mu.Lock()
		now := time.Now()
		if now.Before(s.paused) {
			// A stopped process reads nothing: the request waits in the
			// socket until the process goes on, and is then read in the
			// order it came. The requests that waited wake a nanosecond
			// apart, in that order, rather than all at the pause's end,
			// when the Go scheduler, not the seed, would order them.
			s.queued++
			wait := s.paused.Sub(now) + time.Duration(s.queued)
			s.mu.Unlock()
			time.Sleep(wait)
			continue
		}
		switch {
		case now.Before(s.down):
			r = reply{val: errRefused}
		case s.epoch != epoch:
			r = reply{val: errReset}
		case f.transient != "":
			r = reply{err: f.transient}
		case now.Before(s.loading):
			r = reply{err: "LOADING Redis is loading the dataset in memory"}
		default:
			r = s.dispatch(now, l.db, cmd)
			if strings.HasPrefix(r.err, "NOSCRIPT") {
				// The adapters send EVAL after NOSCRIPT; its round trip
				// is folded into this one.
				r = s.dispatch(now, l.db, append([]string{"EVAL", script.Source()}, cmd[2:]...))
			}
			if r.err == "" {
				l.w.ran(l.client, s, l.db, script.Name(), keys, r.val)
			}
		}
		if tr := l.w.cfg.Trace; tr != nil {
			tr(fmt.Sprintf("%v c%d->%s %s %v %v => %v %s answered=%v", l.w.h.Now(), l.client, l.name, script.Name(), keys, cmd[3+len(keys):], r.val, r.err, answer && done != nil))
		}
		s.mu.Unlock()
		break
	}
	if !answer || done == nil {
		return
	}
	time.Sleep(f.back)
	done <- r
}

// Notify subscribes wake to the releases announced on channel by the
// scripts that run on the server (PUBLISH), as long as ctx lasts. The
// subscription outlives restarts of the server's process, as a client
// library's reconnecting subscription does.
func (l *link) Notify(ctx context.Context, channel string, wake chan<- struct{}) error {
	s := l.srv
	s.mu.Lock()
	if s.subs == nil {
		s.subs = make(map[string][]chan<- struct{})
	}
	s.subs[channel] = append(s.subs[channel], wake)
	s.mu.Unlock()
	l.w.inflight.Add(1)
	go func() {
		defer l.w.inflight.Done()
		<-ctx.Done()
		s.mu.Lock()
		if i := slices.Index(s.subs[channel], wake); i >= 0 {
			s.subs[channel] = slices.Delete(s.subs[channel], i, i+1)
		}
		s.mu.Unlock()
	}()
	return nil
}

// String names the link in logs.
func (l *link) String() string { return strings.Join([]string{l.name, strconv.Itoa(l.client)}, "@") }
