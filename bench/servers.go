package bench

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
)

// StartServers starts n redis-server processes on loopback ports at once,
// as lockbench does. It returns those that started even when some
// did not; the caller closes every one that is not nil.
func StartServers(n int) ([]*redistest.Server, error) {
	servers := make([]*redistest.Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { servers[i], errs[i] = redistest.New(redistest.Config{}) })
	}
	wg.Wait()
	return servers, errors.Join(errs...)
}

// SlotAgeSlack is how much younger than it is a server may seem to a hash
// slot whose record is made now: the record of the server's start is made
// from its uptime in whole seconds, less one. A wait for fresh servers to
// age past the TTL (restart quarantine) adds it.
const SlotAgeSlack = 2 * time.Second

// CommandLine returns the command that ran with args as one would type it
// at the root of the repository: "cd bench && go run ./cmd/" + name and
// the arguments, quoted where a shell needs it.
func CommandLine(name string, args []string) string {
	words := []string{"cd bench && go run ./cmd/" + name}
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " \t'\"$") {
			a = strconv.Quote(a)
		}
		words = append(words, a)
	}
	return strings.Join(words, " ")
}
