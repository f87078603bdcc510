package goredisnode

import (
	"errors"
	"strings"
	"testing"

	"github.com/quorumlock/redlock"
)

// A URL without a scheme, or empty, gets an error that says what a node
// URL looks like, not the wording of net/url.
func TestDialNoScheme(t *testing.T) {
	for _, raw := range []string{"", " ", "127.0.0.1:24001", "localhost:6379", "ftp://h:1", "u:pw@h:1"} {
		_, err := Dial(raw)
		if err == nil || !strings.Contains(err.Error(), "redis://, rediss:// or unix://, as in redis://127.0.0.1:6379") ||
			!errors.Is(err, redlock.ErrInvalid) || strings.Contains(err.Error(), "pw") {
			t.Errorf("Dial(%q): %v", raw, err)
		}
	}
}

// Every query parameter is checked at Dial: a value go-redis would
// accept but cannot use is refused with an error that wraps
// redlock.ErrInvalid and names the parameter, rather than a panic or a
// pool that eats the memory.
func TestDialParams(t *testing.T) {
	for _, q := range []string{
		"pool_size=-5", "pool_size=100000000000", "min_idle_conns=-1", "max_idle_conns=20000",
		"max_active_conns=99999999999999999999", "max_concurrent_dials=-3", "protocol=7", "db=-1",
		"max_redirects=-2", "dial_timeout=-5s", "read_timeout=1000h", "pool_timeout=x",
		"client_name=a%20b", "failing_timeout_seconds=-1",
	} {
		for _, raw := range []string{"redis://h:1/0?" + q, "redis://h:1?addr=h:2&" + q} {
			if strings.Contains(raw, "addr=") && (strings.HasPrefix(q, "db=")) {
				continue
			}
			_, err := Dial(raw)
			name, _, _ := strings.Cut(q, "=")
			if err == nil || !errors.Is(err, redlock.ErrInvalid) || !strings.Contains(err.Error(), name) {
				t.Errorf("Dial(%q): %v", raw, err)
			}
		}
	}
	for _, q := range []string{"pool_size=10", "pool_size=", "read_timeout=-1", "read_timeout=0", "dial_timeout=3", "protocol=2", "client_name=me", "db=3"} {
		n, err := Dial("redis://h:1?" + q)
		if err != nil {
			t.Errorf("Dial(%q): %v", q, err)
			continue
		}
		n.Close()
	}
	if _, err := Dial("redis://h:1/-1"); err == nil || !errors.Is(err, redlock.ErrInvalid) {
		t.Errorf("database -1: %v", err)
	}
}

// An address that no client could dial (a port out of range, a host that
// is not one) is refused at Dial with an error that wraps
// redlock.ErrInvalid and says what is wrong: dialled, it would read as an
// outage, and a lock would wait for its whole context.
func TestDialAddrs(t *testing.T) {
	for raw, want := range map[string]string{
		"redis://127.0.0.1:99999":                `port "99999"`,
		"redis://h:0":                            `port "0"`,
		"rediss://u:pw@h:65536/1":                `port "65536"`,
		"redis://[::1]:70000":                    `port "70000"`,
		"redis://h:1?addr=h:99999":               `addr="h:99999": port "99999"`,
		"redis://h:1?addr=:2":                    `addr=":2": no host`,
		"redis://h:1?addr=h%20x:2":               `host "h x"`,
		"redis://u:pw@h:1?addr=h:2&addr=[::1]:3": "",
	} {
		n, err := Dial(raw)
		if want == "" {
			if err != nil {
				t.Errorf("Dial(%q): %v", raw, err)
			} else {
				n.Close()
			}
			continue
		}
		if err == nil || !errors.Is(err, redlock.ErrInvalid) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "pw") {
			t.Errorf("Dial(%q): %v; want an error with %s", raw, err, want)
		}
	}
	for _, raw := range []string{"redis://h:65535", "redis://[::1]:6379", "redis://h", "rediss://h:1/2"} {
		n, err := Dial(raw)
		if err != nil {
			t.Errorf("Dial(%q): %v", raw, err)
			continue
		}
		n.Close()
	}
}
