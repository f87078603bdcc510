package bench

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
)

// Machine describes where a run took place.
type Machine struct {
	CPU        string // model name, from /proc/cpuinfo
	Cores      int    // logical CPUs
	GOMAXPROCS int
	OS, Arch   string
	Kernel     string // from /proc/sys/kernel/osrelease
	Go         string // the Go version the harness was built with
	Redis      string // redis-server --version, the "v=" part
}

// DescribeMachine returns what it can find out about this machine; what
// it cannot is left as "?".
func DescribeMachine() Machine {
	m := Machine{CPU: "?", Cores: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), OS: runtime.GOOS, Arch: runtime.GOARCH,
		Kernel: "?", Go: runtime.Version(), Redis: "?"}
	b, _ := os.ReadFile("/proc/cpuinfo")
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			m.CPU = strings.TrimSpace(v)
			break
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	out, _ := exec.Command("redis-server", "--version").Output()
	for _, f := range strings.Fields(string(out)) {
		if v, ok := strings.CutPrefix(f, "v="); ok {
			m.Redis = v
		}
	}
	return m
}

// LoadAverage returns the 1, 5 and 15 minute load averages from
// /proc/loadavg, or "?".
func LoadAverage() string {
	b, _ := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}
