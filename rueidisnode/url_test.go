package rueidisnode

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
)

// A URL without a scheme, or empty, gets an error that says what a node
// URL looks like, not the wording of net/url.
func TestDialNoScheme(t *testing.T) {
	for _, raw := range []string{"", " ", "127.0.0.1:24001", "localhost:6379", "ftp://h:1", "valkey://h:1", "u:pw@h:1"} {
		_, err := Dial(raw)
		if err == nil || !strings.Contains(err.Error(), "redis://, rediss:// or unix://, as in redis://127.0.0.1:6379") ||
			!errors.Is(err, redlock.ErrInvalid) || strings.Contains(err.Error(), "pw") {
			t.Errorf("Dial(%q): %v", raw, err)
		}
	}
}

// Every query parameter is checked at Dial: rueidis ignores those it does
// not know, and accepts values it cannot use; Dial refuses both with an
// error that wraps redlock.ErrInvalid and names the parameter.
func TestDialParams(t *testing.T) {
	for _, q := range []string{
		"pool_size=-5", "dial_timout=1s", "db=-1", "protocol=7", "dial_timeout=-5s",
		"write_timeout=1000h", "max_retries=x", "client_cache=maybe", "skip_verify=perhaps", "client_name=a%20b",
	} {
		_, err := Dial("redis://h:1?" + q)
		name, _, _ := strings.Cut(q, "=")
		if err == nil || !errors.Is(err, redlock.ErrInvalid) || !strings.Contains(err.Error(), name) {
			t.Errorf("Dial(%q): %v", q, err)
		}
	}
	n, err := Dial("redis://h:1?dial_timeout=3s&write_timeout=2s&protocol=2&client_name=me&db=3")
	if err != nil {
		t.Fatal(err)
	}
	n.Close()
	// rueidis.ParseURL takes write_timeout for the dial timeout.
	opt, _, err := parseURL("redis://h:1?dial_timeout=3s&write_timeout=2s")
	if err != nil || opt.Dialer.Timeout != 3*time.Second || opt.ConnWriteTimeout != 2*time.Second {
		t.Errorf("dial timeout %v, write timeout %v, %v", opt.Dialer.Timeout, opt.ConnWriteTimeout, err)
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
