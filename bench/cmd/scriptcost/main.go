// Command scriptcost measures what redlock's scripts cost a redis-server,
// beside what redsync sends: the usec_per_call of INFO commandstats, after
// CONFIG RESETSTAT, over many calls pipelined to a redis-server it starts
// (or to -addr). Every acquire takes a fresh key, as an uncontended lock
// does, with restart quarantine on, as a Client has it by default; the
// node must have run for longer than the TTL (10s) to grant, so a server
// started for the run is given that time first.
// Before each measurement the markers of all 16384 hash slots are written,
// as on a node in service, so that no measured call pays for the first
// use of its slot. Release and extend run on keys an unmeasured acquire
// just took.
//
//	cd bench && go run ./cmd/scriptcost -n 100000 -reps 5
//
// Besides the scripts themselves, it measures them with parts left out
// (quarantine off; the fence alone; the release without its fence
// counter), to show what each part costs.
//
// -only picks the commands to measure by name (a regular expression), so
// that two builds can be compared command by command, taking turns on one
// server.
//
// It prints a Markdown table: µs per call of each repetition, and the
// commands the script ran inside, with their µs per call and calls per
// script.
//
// Times on a shared machine vary from run to run; the instructions a
// server runs do not. -callgrind PID measures them too, on a server run
// under valgrind, zeroing its counts before each measurement and dumping
// them after (callgrind_control); -n can then be small:
//
//	valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.out redis-server --port 7778 --save '' &
//	cd bench && go run ./cmd/scriptcost -addr 127.0.0.1:7778 -callgrind $PID -dumps /tmp/cg.out -n 1000 -reps 2 -pipe 1
//
// The count is every instruction the server ran in user space while the
// calls ran, divided by the calls: its event loop, its reading and
// parsing of the commands and its replies too, but not the kernel's work.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quorumlock/redlock/bench"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/internal/wire"
	"github.com/redis/go-redis/v9"
)

const token = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" // 32 characters, as redlock's tokens

// other is another round's token, which finds the keys token holds.
const other = "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB"

// A variant is one command measured.
type variant struct {
	name   string
	script string // Lua source; "" for a plain SET NX PX
	setup  bool   // acquire the keys first (not measured)
	grants bool   // each call must leave its key set
	keys   func(k string) []string
	args   []any
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "scriptcost:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("addr", "", `a redis-server to measure on, "host:port"; it is flushed. Default: start one`)
	n := flag.Int("n", 100000, "calls per measurement")
	reps := flag.Int("reps", 3, "repetitions of each measurement")
	pipe := flag.Int("pipe", 200, "commands per pipeline")
	only := flag.String("only", "", "measure only the commands whose name matches this regular expression")
	cg := flag.Int("callgrind", 0, "the pid of a redis-server (-addr) running under valgrind --tool=callgrind: also count its instructions per call")
	dumps := flag.String("dumps", "", "with -callgrind: the server's --callgrind-out-file")
	flag.Parse()
	if *cg != 0 && (*addr == "" || *dumps == "") {
		return errors.New("-callgrind needs -addr and -dumps: the server it names and where it writes its counts")
	}
	match, err := regexp.Compile(*only)
	if err != nil {
		return fmt.Errorf("-only: %w", err)
	}
	if *addr == "" {
		s, err := redistest.New(redistest.Config{})
		if err != nil {
			return err
		}
		defer s.Close()
		*addr = s.Addr()
		fmt.Fprintln(os.Stderr, "scriptcost: letting the new server outlive the 10s TTL, so that quarantine lets it grant")
		time.Sleep(12 * time.Second)
	}
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: *addr})
	defer c.Close()

	src := map[string]string{}
	for _, s := range wire.Scripts() {
		src[s.Name()] = s.Source()
	}
	lock := func(k string) []string { return []string{k, wire.MarkerKey(k)} }
	fenced := lock // the fence counter is the slot's, in its marker
	one := func(k string) []string { return []string{k} }
	vs := []variant{
		{name: "SET NX PX (plain command; redsync's acquire)", keys: one},
		{name: "a script that only does SET NX PX", script: "return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])", keys: one, args: []any{token, "10000"}},
		{name: "redlock acquire", script: src["acquire"], keys: lock, args: []any{token, "10000", "1"}, grants: true},
		{name: "redlock acquire, quarantine off (no INFO replication)", script: src["acquire"], keys: lock, args: []any{token, "10000", "0"}, grants: true},
		{name: "redlock acquire of a key another token holds", script: src["acquire"], setup: true, keys: lock, args: []any{other, "10000", "1"}},
		{name: "the commands of an acquisition with quarantine alone, without the script's logic (its floor)", script: floor, keys: lock, args: []any{token, "10000"}, grants: true},
		{name: "TIME, SET NX PX and the fence counter (acquire.lua without the node marker)", script: fenceOnly, keys: fenced, args: []any{token, "10000"}, grants: true},
		{name: "redlock extend", script: src["extend"], setup: true, keys: func(k string) []string { return []string{k, wire.MarkerKey(k)} }, args: []any{token, "10000"}},
		{name: "redlock release (fence = the node's counter)", script: src["release"], setup: true, keys: fenced, args: []any{token, "0"}},
		{name: "redlock release where the node's grant gave the fence (no marker: lean)", script: src["release"], setup: true, keys: one, args: []any{token, "0"}},
		{name: "redlock release (fence above the node's counter)", script: src["release"], setup: true, keys: fenced, args: []any{token, "9000000000000000"}},
		{name: "redlock release, quiet, of a key another token holds (a failed round's clean-up)", script: src["release"], setup: true, keys: fenced, args: []any{other, "0", "quiet"}},
		{name: "compare-and-delete and PUBLISH (release.lua without the fence counter)", script: `local v = redis.call("GET", KEYS[1])
if v == ARGV[1] then redis.call("DEL", KEYS[1]); return redis.pcall("PUBLISH", "redlock:released:" .. KEYS[1], "") elseif v == false then return -1 else return 0 end`, setup: true, keys: one, args: []any{token}},
		{name: "compare-and-delete (redsync's release)", script: `local v = redis.call("GET", KEYS[1])
if v == ARGV[1] then return redis.call("DEL", KEYS[1]) elseif v == false then return -1 else return 0 end`, setup: true, keys: one, args: []any{token}},
	}
	m := measurer{c: c, n: *n, pipe: *pipe, acquire: src["acquire"], warm: slotKeys()}
	if *cg != 0 {
		m.ir = &counter{pid: *cg, dumps: *dumps}
		fmt.Printf("| command | µs per call (%d × %d calls) | instructions per call | inside: µs per call × calls |\n|---|---|---|---|\n", *reps, *n)
	} else {
		fmt.Printf("| command | µs per call (%d × %d calls) | inside: µs per call × calls |\n|---|---|---|\n", *reps, *n)
	}
	for _, v := range vs {
		if !match.MatchString(v.name) {
			continue
		}
		var per, irs []string
		var inner string
		for rep := range *reps {
			us, ir, in, err := m.measure(ctx, v, rep)
			if err != nil {
				return fmt.Errorf("%s: %w", v.name, err)
			}
			per = append(per, fmt.Sprintf("%.2f", us))
			irs = append(irs, strconv.FormatInt(ir, 10))
			inner = in
		}
		if m.ir != nil {
			fmt.Printf("| %s | %s | %s | %s |\n", v.name, strings.Join(per, ", "), strings.Join(irs, ", "), inner)
			continue
		}
		fmt.Printf("| %s | %s | %s |\n", v.name, strings.Join(per, ", "), inner)
	}
	return nil
}

// fenceOnly is acquire.lua less the node marker and its quarantine: what
// the fence alone costs over SET NX PX.
const fenceOnly = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
	local fence = math.max((tonumber(redis.call('HGET', KEYS[2], 'fence')) or 0) + 1, now)
	redis.call('HSET', KEYS[2], 'fence', string.format('%d', fence))
	return {1, fence}
end
return {0, redis.call('PTTL', KEYS[1])}`

// floor runs the commands that an acquisition with quarantine needs on
// its common path (see acquire_one.lua), and nothing else: what the
// script would cost if its logic cost nothing.
const floor = `redis.call('TIME')
redis.call('HMGET', KEYS[2], 'v', 'lastsave', 'replid', 'start', 'quiet', 'ttl1', 'until2', 'ttl2', 'fence')
redis.pcall('LASTSAVE')
redis.pcall('INFO', 'replication')
redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2], 'GET')
redis.call('HSET', KEYS[2], 'fence', '1795851335534665')
return {1, 1795851335534665, 1234567, 10000}`

type measurer struct {
	c       *redis.Client
	n, pipe int
	acquire string
	warm    []string // a key in each hash slot
	ir      *counter // nil: no instruction counts
}

// A counter counts the instructions of a redis-server that runs under
// valgrind's callgrind tool.
type counter struct {
	pid   int
	dumps string // the server's --callgrind-out-file
}

// zero sets the server's counts to zero.
func (k *counter) zero() error {
	if out, err := exec.Command("callgrind_control", "-z", strconv.Itoa(k.pid)).CombinedOutput(); err != nil {
		return fmt.Errorf("callgrind_control -z: %v: %s", err, out)
	}
	return nil
}

// read dumps the server's counts since zero, into a new file next to
// dumps, and returns the instructions they hold.
func (k *counter) read() (int64, error) {
	if out, err := exec.Command("callgrind_control", "-d", strconv.Itoa(k.pid)).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("callgrind_control -d: %v: %s", err, out)
	}
	files, err := filepath.Glob(k.dumps + ".*")
	if err != nil || len(files) == 0 {
		return 0, fmt.Errorf("no dump of callgrind at %s.*", k.dumps)
	}
	var newest string
	var at time.Time
	for _, f := range files {
		if st, err := os.Stat(f); err == nil && st.ModTime().After(at) {
			newest, at = f, st.ModTime()
		}
	}
	b, err := os.ReadFile(newest)
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		for _, p := range []string{"summary: ", "totals: "} {
			if v, ok := strings.CutPrefix(line, p); ok {
				return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			}
		}
	}
	return 0, fmt.Errorf("%s holds no totals", newest)
}

// slotKeys returns a key in each of the 16384 hash slots, found by trying
// names until every slot's marker has one.
func slotKeys() []string {
	seen := make(map[string]bool, 16384)
	var keys []string
	for i := 0; len(keys) < 16384; i++ {
		k := fmt.Sprintf("warm:%d", i)
		if m := wire.MarkerKey(k); !seen[m] {
			seen[m] = true
			keys = append(keys, k)
		}
	}
	return keys
}

// measure runs v n times on a flushed server and returns the µs per call
// of its command, the server's instructions per call (0 without m.ir)
// and a summary of the commands it ran inside.
func (m *measurer) measure(ctx context.Context, v variant, rep int) (us float64, ir int64, inner string, err error) {
	c := m.c
	if err := c.FlushAll(ctx).Err(); err != nil {
		return 0, 0, "", err
	}
	key := func(i int) string { return fmt.Sprintf("cost:%d:%d", rep, i) }
	acq, err := c.ScriptLoad(ctx, m.acquire).Result()
	if err != nil {
		return 0, 0, "", err
	}
	acquire := func(p redis.Pipeliner, k string) {
		p.EvalSha(ctx, acq, []string{k, wire.MarkerKey(k)}, token, "10000", "1")
	}
	// A node in service has the marker of every hash slot that a lock has
	// used: write those of the slots the measured keys use (all of them,
	// unless n is small), with one lock per slot, before measuring.
	used := make(map[string]bool)
	for i := range m.n {
		used[wire.MarkerKey(key(i))] = true
	}
	var warm []string
	for _, k := range m.warm {
		if used[wire.MarkerKey(k)] {
			warm = append(warm, k)
		}
	}
	if err := m.batches(ctx, len(warm), func(p redis.Pipeliner, i int) { acquire(p, warm[i]) }); err != nil {
		return 0, 0, "", err
	}
	if v.setup {
		if err := m.batches(ctx, m.n, func(p redis.Pipeliner, i int) { acquire(p, key(i)) }); err != nil {
			return 0, 0, "", err
		}
	}
	var sha string
	if v.script != "" {
		if sha, err = c.ScriptLoad(ctx, v.script).Result(); err != nil {
			return 0, 0, "", err
		}
	}
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		return 0, 0, "", err
	}
	if m.ir != nil {
		if err := m.ir.zero(); err != nil {
			return 0, 0, "", err
		}
	}
	err = m.batches(ctx, m.n, func(p redis.Pipeliner, i int) {
		if sha == "" {
			p.SetNX(ctx, key(i), token, 10e9)
			return
		}
		p.EvalSha(ctx, sha, v.keys(key(i)), v.args...)
	})
	if err != nil {
		return 0, 0, "", err
	}
	if m.ir != nil {
		total, err := m.ir.read()
		if err != nil {
			return 0, 0, "", err
		}
		ir = total / int64(m.n)
	}
	// The INFO that reads them is not counted in its own reply: the INFO
	// calls listed are the scripts'.
	stats, err := bench.CommandStats(ctx, c)
	if err != nil {
		return 0, 0, "", err
	}
	delete(stats, "config|resetstat")
	usec := func(s bench.CommandStat) float64 { return float64(s.Usec) / float64(s.Calls) }
	if v.grants {
		if n, err := c.Exists(ctx, key(0), key(m.n-1)).Result(); err != nil || n != 2 {
			return 0, 0, "", fmt.Errorf("the calls did not take their keys (%d of 2 checked, %v): is the node younger than the TTL?", n, err)
		}
	}
	main := "evalsha"
	if sha == "" {
		main = "set"
	}
	if got := stats[main].Calls; got != int64(m.n) {
		return 0, 0, "", fmt.Errorf("%d calls of %s, want %d", got, main, m.n)
	}
	var parts []string
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range stats {
			if k != main && !yield(k) {
				return
			}
		}
	}) {
		s := stats[name]
		parts = append(parts, fmt.Sprintf("%s %.2f×%.1f", name, usec(s), float64(s.Calls)/float64(m.n)))
	}
	return usec(stats[main]), ir, strings.Join(parts, "; "), nil
}

// batches calls f for 0 ≤ i < n, sending the commands pipe at a time.
func (m *measurer) batches(ctx context.Context, n int, f func(p redis.Pipeliner, i int)) error {
	for i := 0; i < n; i += m.pipe {
		p := m.c.Pipeline()
		for j := i; j < min(i+m.pipe, n); j++ {
			f(p, j)
		}
		cmds, _ := p.Exec(ctx)
		for _, cmd := range cmds {
			if err := cmd.Err(); err != nil && !errors.Is(err, redis.Nil) {
				return err
			}
		}
	}
	return nil
}
