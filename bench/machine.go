package bench

import (
	"bufio"
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
	m := Machine{
		CPU:        "?",
		Cores:      runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		OS:         runtime.GOOS,
		Arch:       runtime.GOARCH,
		Kernel:     "?",
		Go:         runtime.Version(),
		Redis:      "?",
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if out, err := exec.Command("redis-server", "--version").Output(); err == nil {
		for _, f := range strings.Fields(string(out)) {
			if v, ok := strings.CutPrefix(f, "v="); ok {
				m.Redis = v
			}
		}
	}
	return m
}

// LoadAverage returns the 1, 5 and 15 minute load averages from
// /proc/loadavg, or "?".
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
