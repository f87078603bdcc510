package main

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/quorumlock/redlock/bench"
)

// A result is one run, ready to print.
type result struct {
	cfg                   config
	command               string
	when                  time.Time
	machine               bench.Machine
	loadBefore, loadAfter string
	clientCPUs            string
	servers               []server
	tallies               []*tally
	traced                []*traced
}

// µs formats d in microseconds with one decimal.
func µs(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/1e3) }

// perPair formats total/pairs with the given decimals, or "" when the
// total is unknown or there were no pairs.
func perPair(total float64, pairs int64, ok bool, decimals int) string {
	if !ok || pairs == 0 {
		return ""
	}
	return fmt.Sprintf("%.*f", decimals, total/float64(pairs))
}

// spread formats the least and the greatest of ds in µs, as "43.1–168.0".
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return ""
	}
	return µs(slices.Min(ds)) + "–" + µs(slices.Max(ds))
}

// othersCPU returns how many CPUs the machine's other processes kept busy
// on average while t's slices ran: the machine's busy time less the
// client's and the servers', over the measured time. /proc/stat counts in
// 10ms ticks, so short runs read coarsely.
func othersCPU(t *tally) string {
	c := t.cost
	if !c.busyOK || !c.clientOK || t.wall <= 0 {
		return ""
	}
	busy := float64(c.busy) / ticksPerSecond
	own := float64(c.clientRun+c.serverRun) / 1e9
	return fmt.Sprintf("%.2f", max(busy-own, 0)/t.wall.Seconds())
}

func (r *result) markdown() string {
	var b strings.Builder
	cfg := r.cfg
	m := r.machine
	fmt.Fprintf(&b, "### waits: W1 N=%d G=1, %s\n\n", cfg.n, r.when.UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "- Command: `%s`\n", r.command)
	fmt.Fprintf(&b, "- Machine: %s, %d logical CPUs (GOMAXPROCS %d), %s/%s, kernel %s; %s; load average %s at the start, %s at the end\n",
		m.CPU, m.Cores, m.GOMAXPROCS, m.OS, m.Arch, m.Kernel, m.Go, r.loadBefore, r.loadAfter)
	var srv []string
	for _, s := range r.servers {
		pid := "pid unknown"
		if s.pid > 0 {
			pid = fmt.Sprintf("pid %d on CPUs %s", s.pid, s.cpus)
		}
		srv = append(srv, fmt.Sprintf("redis-server %s at %s (%s)", s.version, s.addr, pid))
	}
	fmt.Fprintf(&b, "- Client on CPUs %s; %s\n", r.clientCPUs, strings.Join(srv, "; "))
	q := "on"
	if !cfg.quarantine {
		q = "off"
	}
	fmt.Fprintf(&b, "- Each library: %d slices of %v, the libraries taking turns; TTL %v; redlock's restart quarantine %s\n\n", cfg.slices, cfg.slice, cfg.ttl, q)

	b.WriteString("Latency (µs):\n\n")
	b.WriteString("| library | pairs/s | acquire p50 | release p50 | acquire p90 | release p90 | slices' acquire p50 | slices' release p50 | in node per pair |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, t := range r.tallies {
		if t.pairs == 0 || t.wall <= 0 {
			fmt.Fprintf(&b, "| %s |%s\n", t.lib, strings.Repeat("  |", 8))
			continue
		}
		fmt.Fprintf(&b, "| %s | %.0f | %s | %s | %s | %s | %s | %s | %s |\n", t.lib, float64(t.pairs)/t.wall.Seconds(),
			µs(t.acq.quantile(0.5)), µs(t.rel.quantile(0.5)), µs(t.acq.quantile(0.9)), µs(t.rel.quantile(0.9)),
			spread(t.sliceAcq), spread(t.sliceRel), perPair(float64(t.cost.inNode)/1e3, t.pairs, t.cost.inNodeOK, 1))
	}

	b.WriteString("\nPer lock+release pair (CPU in µs; idle entries and others' CPU are the whole machine's):\n\n")
	b.WriteString("| library | allocs | bytes | goroutines created | voluntary switches | client CPU | client run-queue wait | server CPU | server voluntary switches | CPU idle entries | others' CPU (CPUs) |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, t := range r.tallies {
		c, n := t.cost, t.pairs
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", t.lib,
			perPair(float64(c.allocs), n, c.metricsOK, 1), perPair(float64(c.bytes), n, c.metricsOK, 0), perPair(float64(c.goroutines), n, c.metricsOK, 2),
			perPair(float64(c.switches), n, c.switchesOK, 2),
			perPair(float64(c.clientRun)/1e3, n, c.clientOK, 1), perPair(float64(c.clientWait)/1e3, n, c.clientOK, 1),
			perPair(float64(c.serverRun)/1e3, n, c.serverOK, 1), perPair(float64(c.serverSwitches), n, c.serverOK, 2),
			perPair(float64(c.idle), n, c.idleOK, 2), othersCPU(t))
	}

	if len(r.traced) > 0 {
		fmt.Fprintf(&b, "\nRuntime trace (`-trace %s`), %d pairs of each library after the measured slices, in turns of %d; per pair, of the goroutine that calls lock and release: time (µs) by state and parks by reason; then what the whole process did:\n\n", cfg.traceFile, cfg.tracePairs, traceChunk)
		b.WriteString("| library | wall | running | in syscalls | runnable | parked, by reason | parks, by reason | syscalls | goroutines created | others woken | P starts |\n")
		b.WriteString("|---|--:|--:|--:|--:|---|---|--:|--:|--:|--:|\n")
		for _, t := range r.traced {
			n := int64(t.pairs)
			parked := map[string]float64{}
			for k, v := range t.time {
				if reason, ok := strings.CutPrefix(k, "waiting: "); ok {
					parked[reason] = float64(v) / 1e3
				}
			}
			parks := map[string]float64{}
			for k, v := range t.parks {
				parks[k] = float64(v)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", t.lib,
				perPair(float64(t.wall)/1e3, n, true, 1),
				perPair(float64(t.time["running"])/1e3, n, true, 1), perPair(float64(t.time["syscall"])/1e3, n, true, 1),
				perPair(float64(t.time["runnable"])/1e3, n, true, 1),
				byReason(parked, n, 1), byReason(parks, n, 2),
				perPair(float64(t.syscalls), n, true, 2), perPair(float64(t.created), n, true, 2),
				perPair(float64(t.woken), n, true, 2), perPair(float64(t.procStarts), n, true, 2))
		}
	}
	return b.String()
}

// byReason formats the per-pair values of m, largest first, as "network
// 61.2, chan receive 3.0", leaving out those below half the last decimal.
func byReason(m map[string]float64, pairs int64, decimals int) string {
	keys := slices.SortedFunc(maps.Keys(m), func(a, b string) int {
		return cmp.Or(cmp.Compare(m[b], m[a]), strings.Compare(a, b))
	})
	var parts []string
	for _, k := range keys {
		v := m[k] / float64(pairs)
		s := fmt.Sprintf("%.*f", decimals, v)
		if strings.Trim(s, "0.") == "" {
			continue
		}
		if k == "" {
			k = "unnamed"
		}
		parts = append(parts, k+" "+s)
	}
	return strings.Join(parts, ", ")
}
