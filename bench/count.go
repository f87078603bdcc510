package bench

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// A CommandCount is what the first server ran while one library made
// lock+release pairs on it, one at a time, on keys it had locked before,
// from INFO stats and commandstats read before and after.
type CommandCount struct {
	Library string
	Pairs   int
	// Reads are the reads the server made from its clients' connections
	// (total_reads_processed): with one request in flight at a time, and
	// requests as small as these, one per request, so the round trips.
	Reads int64
	// Calls are the calls of each command, by the name INFO commandstats
	// gives it ("evalsha"): those the client sent and those its scripts
	// ran.
	Calls map[string]int64
	// ScriptUsec is the server's time in script commands (their usec), in
	// microseconds, the commands the scripts ran included.
	ScriptUsec int64
	// Errors are the calls the server refused (rejected_calls) or that
	// returned an error (failed_calls, NOSCRIPT included).
	Errors int64
}

// scriptCommands are the commands that run a script.
var scriptCommands = []string{"eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro"}

// perPair returns calls per lock+release pair.
func (cc CommandCount) perPair(calls int64) float64 {
	return share(uint64(max(calls, 0)), uint64(cc.Pairs))
}

// Summary lists the commands per pair, script calls first, then by name,
// as in "evalsha 2.00, get 2.00".
func (cc CommandCount) Summary() string {
	var parts []string
	for _, name := range slices.SortedFunc(maps.Keys(cc.Calls), func(a, b string) int {
		return strings.Compare(fmt.Sprint(!slices.Contains(scriptCommands, a), a), fmt.Sprint(!slices.Contains(scriptCommands, b), b))
	}) {
		parts = append(parts, fmt.Sprintf("%s %.2f", name, cc.perPair(cc.Calls[name])))
	}
	return strings.Join(parts, ", ")
}

// countCommands counts, for every library, the commands the first server
// runs per lock+release, as Config.CountPairs asks, before any cell runs.
func (r *Report) countCommands(ctx context.Context) error {
	cfg := &r.Config
	for _, lib := range cfg.Libraries {
		if cfg.CountPairs == 0 {
			return nil
		}
		cc, err := countCommands(ctx, cfg, lib)
		if err != nil {
			return fmt.Errorf("counting the commands of %s: %w", lib, err)
		}
		r.Commands = append(r.Commands, cc)
		cfg.progress("commands per lock+release, %s: %s; %.2f round trips; %.1fµs in scripts; %d errors in %d pairs",
			cc.Library, cc.Summary(), cc.perPair(cc.Reads), cc.perPair(cc.ScriptUsec), cc.Errors, cc.Pairs)
	}
	return nil
}

// countCommands opens lib's client on the first server as W1 does and
// makes cfg.CountPairs lock+release pairs, one at a time, over
// keysPerWorker keys, each of which it has locked and released once
// before: so the connections are made, the scripts cached and the keys'
// slot records written, as on a node in service.
func countCommands(ctx context.Context, cfg *Config, lib string) (CommandCount, error) {
	cc := CommandCount{Library: lib, Pairs: cfg.CountPairs, Calls: map[string]int64{}}
	cl, err := open(lib, cfg.servers()[:1], settings{ttl: cfg.TTL, quarantine: cfg.Quarantine})
	if err != nil {
		return cc, err
	}
	defer cl.close()
	keys := make([]string, keysPerWorker)
	for k := range keys {
		keys[k] = fmt.Sprintf("lockbench:count:%s:k%d", lib, k)
	}
	w := cl.worker(keys)
	if err := pairs(ctx, w, len(keys), len(keys)); err != nil {
		return cc, fmt.Errorf("warm-up: %w", err)
	}
	st := newServerStats(cfg.servers()[:1])
	defer st.close()
	before, err := st.read(ctx, "stats", "commandstats")
	if err != nil {
		return cc, err
	}
	if err := pairs(ctx, w, cfg.CountPairs, len(keys)); err != nil {
		return cc, err
	}
	after, err := st.read(ctx, "stats", "commandstats")
	if err != nil {
		return cc, err
	}
	// The server counted the read of the second INFO before answering it,
	// and the first INFO once it had answered it.
	cc.Reads = after.reads - before.reads - 1
	for name, a := range after.calls {
		b := before.calls[name]
		if n := a.Calls - b.Calls - btoi(name == "info"); n != 0 {
			cc.Calls[name] = n
		}
		if slices.Contains(scriptCommands, name) {
			cc.ScriptUsec += a.Usec - b.Usec
		}
		cc.Errors += a.Errors - b.Errors
	}
	return cc, nil
}

func btoi(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// serverStats reads INFO from a set of servers.
type serverStats struct{ cs []*redis.Client }

func newServerStats(addrs []string) *serverStats {
	s := &serverStats{}
	for _, a := range addrs {
		s.cs = append(s.cs, redis.NewClient(&redis.Options{Addr: a}))
	}
	return s
}

func (s *serverStats) close() { closeAll(s.cs) }

// stats are figures of INFO, summed over servers.
type stats struct {
	cpu      time.Duration // used_cpu_sys plus used_cpu_user, all threads
	reads    int64         // total_reads_processed
	commands int64         // total_commands_processed
	calls    map[string]CommandStat
}

// A CommandStat is one command's line of INFO commandstats: its calls,
// the microseconds they took, and those refused or failed.
type CommandStat struct{ Calls, Usec, Errors int64 }

// CommandStats returns INFO commandstats of c's server by command name,
// as "evalsha" or "config|resetstat".
func CommandStats(ctx context.Context, c *redis.Client) (map[string]CommandStat, error) {
	st, err := (&serverStats{cs: []*redis.Client{c}}).read(ctx, "commandstats")
	return st.calls, err
}

// read reads the sections of INFO given, with one INFO per server.
func (s *serverStats) read(ctx context.Context, sections ...string) (stats, error) {
	st := stats{calls: map[string]CommandStat{}}
	for _, c := range s.cs {
		info, err := c.Info(ctx, sections...).Result()
		if err != nil {
			return st, fmt.Errorf("INFO %s: %w", strings.Join(sections, " "), err)
		}
		for line := range strings.SplitSeq(info, "\n") {
			key, val, _ := strings.Cut(strings.TrimSpace(line), ":")
			n, _ := strconv.ParseInt(val, 10, 64)
			switch key {
			case "used_cpu_sys", "used_cpu_user":
				f, _ := strconv.ParseFloat(val, 64)
				st.cpu += time.Duration(f * 1e9)
			case "total_reads_processed":
				st.reads += n
			case "total_commands_processed":
				st.commands += n
			}
			name, ok := strings.CutPrefix(key, "cmdstat_")
			if !ok {
				continue
			}
			// cmdstat_evalsha:calls=2,usec=31,usec_per_call=15.50,rejected_calls=0,failed_calls=0
			cs := st.calls[name]
			for f := range strings.SplitSeq(val, ",") {
				k, v, _ := strings.Cut(f, "=")
				n, _ := strconv.ParseInt(v, 10, 64)
				switch k {
				case "calls":
					cs.Calls += n
				case "usec":
					cs.Usec += n
				case "rejected_calls", "failed_calls":
					cs.Errors += n
				}
			}
			st.calls[name] = cs
		}
	}
	return st, nil
}

// infoField returns the value of field name in an INFO reply, or "".
func infoField(info, name string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}
