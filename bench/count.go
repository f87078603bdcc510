package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// A CommandCount is what the servers of one node ran while one library
// made lock+release pairs on it, one at a time, on keys it had locked
// before, read from INFO stats and commandstats before and after.
type CommandCount struct {
	Library string
	Node    string // "1 server" (see target.String)
	Pairs   int
	// Reads are the reads the servers made from their clients' connections
	// (total_reads_processed): with one request in flight at a time, and
	// requests as small as these, one per request, so the round trips.
	Reads int64
	// Calls are the calls of each command, by the name INFO commandstats
	// gives it ("evalsha", "cluster|slots"), summed over the node's
	// servers: the commands the client sent and those its scripts ran.
	Calls map[string]int64
	// ScriptUsec is the time the servers spent running scripts (the usec of
	// the script commands), in microseconds, the commands the scripts ran
	// included.
	ScriptUsec int64
	// Rejected are the calls the servers refused without running them
	// (a MOVED or ASK redirection, CROSSSLOT, a wrong argument count);
	// Failed those that ran and returned an error (NOSCRIPT, an error
	// raised by a script).
	Rejected, Failed int64
}

// scriptCommands are the commands that run a script: the requests of a
// library that does all its work in scripts.
var scriptCommands = []string{"eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro"}

// perPair returns calls per lock+release pair.
func (cc CommandCount) perPair(calls int64) float64 {
	if cc.Pairs == 0 {
		return 0
	}
	return float64(calls) / float64(cc.Pairs)
}

// RoundTrips returns the reads per lock+release pair: the round trips.
func (cc CommandCount) RoundTrips() float64 { return cc.perPair(cc.Reads) }

// ScriptMicros returns the servers' time in scripts per lock+release pair,
// in microseconds.
func (cc CommandCount) ScriptMicros() float64 { return cc.perPair(cc.ScriptUsec) }

// Scripts returns the script calls per lock+release pair.
func (cc CommandCount) Scripts() float64 {
	var n int64
	for _, name := range scriptCommands {
		n += cc.Calls[name]
	}
	return cc.perPair(n)
}

// Summary lists the commands per pair, script calls first, then by name,
// as in "evalsha 2.00, get 2.00, ...". A command with fewer calls than
// one per hundred pairs is given as its count, as in "ping 1 call".
func (cc CommandCount) Summary() string {
	names := slices.SortedFunc(maps.Keys(cc.Calls), func(a, b string) int {
		sa, sb := slices.Contains(scriptCommands, a), slices.Contains(scriptCommands, b)
		switch {
		case sa && !sb:
			return -1
		case sb && !sa:
			return 1
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for _, name := range names {
		n := cc.Calls[name]
		switch {
		case n == 0:
			continue
		case n*100 < int64(cc.Pairs) && n == 1:
			parts = append(parts, fmt.Sprintf("%s 1 call", name))
		case n*100 < int64(cc.Pairs):
			parts = append(parts, fmt.Sprintf("%s %d calls", name, n))
		default:
			parts = append(parts, fmt.Sprintf("%s %.2f", name, cc.perPair(n)))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// progress is the line printed once the count is done.
func (cc CommandCount) progress() string {
	return fmt.Sprintf("commands per lock+release, %s on %s: %s; %.2f round trips; %.1fµs in scripts; refused %d, failed %d in %d pairs",
		cc.Library, cc.Node, cc.Summary(), cc.RoundTrips(), cc.ScriptMicros(), cc.Rejected, cc.Failed, cc.Pairs)
}

// countCommands counts, for every library, the commands the servers run
// per lock+release on the first server, as
// Config.CountPairs asks, before any cell runs.
func (r *Report) countCommands(ctx context.Context) error {
	cfg := &r.Config
	if cfg.CountPairs == 0 {
		return nil
	}
	for _, t := range []target{cfg.Addrs[:1]} {
		for _, lib := range cfg.Libraries {
			cc, err := countCommands(ctx, cfg, lib, t)
			if err != nil {
				return fmt.Errorf("counting the commands of %s on %s: %w", lib, t, err)
			}
			r.Commands = append(r.Commands, cc)
			if cfg.Progress != nil {
				fmt.Fprintln(cfg.Progress, cc.progress())
			}
		}
	}
	return nil
}

// countCommands opens lib's client on t as W1 does and makes
// cfg.CountPairs lock+release pairs, one at a time, over keysPerWorker
// keys, each of which it has locked and released once before: so the
// connections are made, the scripts cached on every server the keys
// reach, and the keys' slot records written, as on a node in service. It
// reads INFO stats and commandstats of every server of t before and after.
func countCommands(ctx context.Context, cfg *Config, lib string, t target) (CommandCount, error) {
	cc := CommandCount{Library: lib, Node: t.String(), Pairs: cfg.CountPairs}
	cl, err := open(lib, t, settings{retry: RetryDefault, tunedDelay: cfg.TunedDelay, ttl: cfg.TTL, quarantine: cfg.Quarantine})
	if err != nil {
		return cc, err
	}
	defer cl.close()
	keys := make([]string, keysPerWorker)
	for k := range keys {
		keys[k] = fmt.Sprintf("lockbench:count:%s:k%d", strings.ReplaceAll(lib, " ", "-"), k)
	}
	w := cl.worker(keys)
	pair := func(i int) error {
		ok, err := w.lock(ctx, i%len(keys))
		if err == nil && !ok {
			err = errors.New("not obtained without contention")
		}
		if err != nil {
			return err
		}
		return w.unlock(ctx)
	}
	for i := range keys {
		if err := pair(i); err != nil {
			return cc, fmt.Errorf("warm-up: %w", err)
		}
	}

	stats := make([]*redis.Client, len(t))
	for i, a := range t {
		stats[i] = redis.NewClient(&redis.Options{Addr: a})
	}
	defer closeAll(stats)
	before, readsBefore, err := readStats(ctx, stats)
	if err != nil {
		return cc, err
	}
	for i := range cfg.CountPairs {
		if err := pair(i); err != nil {
			return cc, err
		}
	}
	after, readsAfter, err := readStats(ctx, stats)
	if err != nil {
		return cc, err
	}
	// Each server counted the read of the second INFO before answering it.
	cc.Reads = readsAfter - readsBefore - int64(len(stats))
	cc.Calls = map[string]int64{}
	for name, a := range after {
		b := before[name]
		cc.Calls[name] = a.calls - b.calls
		if slices.Contains(scriptCommands, name) {
			cc.ScriptUsec += a.usec - b.usec
		}
		cc.Rejected += a.rejected - b.rejected
		cc.Failed += a.failed - b.failed
	}
	// Each server counted the INFO that read its first figures once it had
	// answered; the INFO that read the second is not in its own answer.
	cc.Calls["info"] -= int64(len(stats))
	for name, n := range cc.Calls {
		if n == 0 {
			delete(cc.Calls, name)
		}
	}
	return cc, nil
}

// commandStat is one command's line of INFO commandstats.
type commandStat struct {
	calls, usec, rejected, failed int64
}

// readStats returns INFO commandstats of every server of cs, summed by
// command, and the sum of their total_reads_processed, read with one INFO
// per server.
func readStats(ctx context.Context, cs []*redis.Client) (map[string]commandStat, int64, error) {
	out := map[string]commandStat{}
	var reads int64
	for _, c := range cs {
		info, err := c.Info(ctx, "stats", "commandstats").Result()
		if err != nil {
			return nil, 0, fmt.Errorf("INFO stats commandstats: %w", err)
		}
		sc := bufio.NewScanner(strings.NewReader(info))
		for sc.Scan() {
			// cmdstat_evalsha:calls=2,usec=31,usec_per_call=15.50,rejected_calls=0,failed_calls=0
			key, rest, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
			if key == "total_reads_processed" {
				n, err := strconv.ParseInt(rest, 10, 64)
				if err != nil {
					return nil, 0, fmt.Errorf("INFO stats: total_reads_processed:%s", rest)
				}
				reads += n
				continue
			}
			name, isCmd := strings.CutPrefix(key, "cmdstat_")
			if !ok || !isCmd {
				continue
			}
			s := out[name]
			for f := range strings.SplitSeq(rest, ",") {
				k, v, _ := strings.Cut(f, "=")
				n, _ := strconv.ParseInt(v, 10, 64)
				switch k {
				case "calls":
					s.calls += n
				case "usec":
					s.usec += n
				case "rejected_calls":
					s.rejected += n
				case "failed_calls":
					s.failed += n
				}
			}
			out[name] = s
		}
		if err := sc.Err(); err != nil {
			return nil, 0, err
		}
	}
	return out, reads, nil
}

// A cpuReader reads the CPU time that servers have used, system and user
// (INFO cpu used_cpu_sys and used_cpu_user, all their threads), summed
// over them.
type cpuReader struct{ cs []*redis.Client }

func newCPUReader(addrs []string) *cpuReader {
	r := &cpuReader{}
	for _, a := range addrs {
		r.cs = append(r.cs, redis.NewClient(&redis.Options{Addr: a}))
	}
	return r
}

func (r *cpuReader) close() { closeAll(r.cs) }

func (r *cpuReader) read(ctx context.Context) (time.Duration, error) {
	var sum float64
	for _, c := range r.cs {
		info, err := c.Info(ctx, "cpu").Result()
		if err != nil {
			return 0, fmt.Errorf("INFO cpu: %w", err)
		}
		for _, f := range []string{"used_cpu_sys", "used_cpu_user"} {
			v, err := strconv.ParseFloat(infoField(info, f), 64)
			if err != nil {
				return 0, fmt.Errorf("INFO cpu %s: %w", f, err)
			}
			sum += v
		}
	}
	return time.Duration(sum * 1e9), nil
}
