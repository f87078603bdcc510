package nodeurl

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
)

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"redis://h:6379":                  "redis://h:6379",
		"redis://u:s3cret@h:6379/1":       "redis://xxxxx@h:6379/1",
		"redis://:s3cret@h":               "redis://xxxxx@h",
		"unix://u:p@/run/redis.sock?db=2": "unix://xxxxx@/run/redis.sock?db=2",
		"redis://u:p@ss@h":                "redis://xxxxx@h",
		"u:p@h":                           "xxxxx@h",
		"//u:p@h":                         "//xxxxx@h",
		"//a:pw@b://c@d":                  "//xxxxx@d",
		"a:pw@redis://h":                  "xxxxx@redis://h",
		"u:pa://ss@h":                     "xxxxx@h",
	} {
		got, redacted := Redact(in)
		if got != want || redacted != strings.Contains(in, "@") {
			t.Errorf("Redact(%q) = %q, %v; want %q", in, got, redacted, want)
		}
	}
}

func TestErrorHidesPassword(t *testing.T) {
	parse := func(s string) error { _, err := url.Parse(s); return err }
	// The password holds a '/', so a parser takes part of it for the host.
	raw := "redis://u:12345/secret@h:6379"
	err := Error("pkg", raw, errors.New("bad port \"12345/secret\""), parse)
	if strings.Contains(err.Error(), "secret") || !strings.HasPrefix(err.Error(), `pkg: invalid URL "redis://xxxxx@h:6379": malformed user information`) {
		t.Fatalf("Error = %v", err)
	}
	// Without user information the parser's own reason is kept, without
	// the *url.Error wrapper that repeats the URL.
	perr := &url.Error{Op: "parse", URL: "redis://h:port", Err: errors.New(`invalid port ":port" after host`)}
	err = Error("pkg", "redis://h:port", perr, parse)
	if want := `pkg: invalid URL "redis://h:port": invalid port ":port" after host`; err.Error() != want {
		t.Fatalf("Error = %q, want %q", err, want)
	}
}

func TestCluster(t *testing.T) {
	for _, tt := range []struct {
		in      string
		cluster bool
		rest    string
		err     string // a part of the error, "" for none
	}{
		{in: "redis://h:6379", rest: "redis://h:6379"},
		{in: "redis://u:p@h:6379/2?dial_timeout=1s", rest: "redis://u:p@h:6379/2?dial_timeout=1s"},
		{in: "unix:///run/redis.sock?db=1", rest: "unix:///run/redis.sock?db=1"},
		{in: "redis://h?cluster=false", rest: "redis://h?cluster=false"},
		{in: "redis://h:1?addr=h:2", cluster: true, rest: "redis://h:1?addr=h:2"},
		{in: "redis://u:p@h:1/?addr=h:2&addr=h:3&read_timeout=1s", cluster: true, rest: "redis://u:p@h:1/?addr=h:2&addr=h:3&read_timeout=1s"},
		{in: "rediss://h:1/0?addr=h:2", cluster: true, rest: "rediss://h:1/0?addr=h:2"},
		{in: "redis://h:1?cluster=true", cluster: true, rest: "redis://h:1"},
		{in: "redis://h:1?dial_timeout=1s&cluster=1&pool_size=3#x", cluster: true, rest: "redis://h:1?dial_timeout=1s&pool_size=3#x"},
		{in: "redis://h:1?addr=h:2&clus%74er=true", cluster: true, rest: "redis://h:1?addr=h:2"},
		{in: "redis://h:1?cluster=yes", err: `cluster="yes"`},
		{in: "redis://h:1?cluster=false&addr=h:2", err: "cluster=false"},
		{in: "redis://h:1/3?addr=h:2", err: "only database 0"},
		{in: "unix:///run/redis.sock?cluster=true", err: "over TCP"},
		{in: "http://h?addr=h:2", err: "over TCP"},
		// Left for the library to reject.
		{in: "redis://h:port?addr=h:2", rest: "redis://h:port?addr=h:2"},
		{in: "redis://h?addr=%zz", rest: "redis://h?addr=%zz"},
	} {
		cluster, rest, err := Cluster(tt.in)
		switch {
		case tt.err != "":
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Cluster(%q): error %v, want one with %q", tt.in, err, tt.err)
			}
		case err != nil:
			t.Errorf("Cluster(%q): %v", tt.in, err)
		case cluster != tt.cluster || rest != tt.rest:
			t.Errorf("Cluster(%q) = %v, %q; want %v, %q", tt.in, cluster, rest, tt.cluster, tt.rest)
		}
	}
}

func TestScheme(t *testing.T) {
	for in, ok := range map[string]bool{
		"redis://h": true, "REDISS://h": true, "unix:///s": true,
		"": false, "h:6379": false, "127.0.0.1:6379": false, "http://h": false, "u:pa://ss@h": false,
	} {
		if err := Scheme(in); (err == nil) != ok || err != nil && !strings.Contains(err.Error(), Expected) {
			t.Errorf("Scheme(%q) = %v", in, err)
		}
	}
}

func TestParams(t *testing.T) {
	if n, err := Int("n", "7", 0, 10); n != 7 || err != nil {
		t.Errorf("Int 7: %v %v", n, err)
	}
	for _, v := range []string{"-1", "11", "x", "", "99999999999999999999"} {
		if _, err := Int("n", v, 0, 10); err == nil || !strings.Contains(err.Error(), "from 0 to 10") {
			t.Errorf("Int(%q): %v", v, err)
		}
	}
	for v, want := range map[string]time.Duration{"2s": 2 * time.Second, "3": 3 * time.Second, "0": 0} {
		if d, err := Duration("d", v, true); d != want || err != nil {
			t.Errorf("Duration(%q) = %v, %v", v, d, err)
		}
	}
	for _, v := range []string{"-1s", "25h", "x", "99999999999"} {
		if _, err := Duration("d", v, true); err == nil {
			t.Errorf("Duration(%q) accepted", v)
		}
	}
	if _, err := Duration("d", "0", false); err == nil {
		t.Error("Duration 0 accepted where it must be positive")
	}
}

func TestErrorIsInvalid(t *testing.T) {
	err := Error("pkg", "redis://h:x", errors.New("bad"), func(string) error { return errors.New("bad") })
	if !errors.Is(err, redlock.ErrInvalid) {
		t.Errorf("%v does not wrap ErrInvalid", err)
	}
}

func TestAddrs(t *testing.T) {
	for raw, want := range map[string]string{
		"redis://h:6379":                "",
		"redis://[::1]:6379":            "",
		"redis://[::1]":                 "",
		"redis://h":                     "",
		"redis://:pw@h:1":               "",
		"unix:///tmp/r.sock":            "",
		"redis://h:1?addr=h:2&addr=h:3": "",
		"redis://h:99999":               `port "99999"`,
		"redis://h:0":                   `port "0"`,
		"rediss://[::1]:65536":          `port "65536"`,
		"redis://h:1?addr=h:70000":      `addr="h:70000": port "70000"`,
		"redis://h:1?addr=:2":           `addr=":2": no host`,
		"redis://h:1?addr=a%20b:2":      `host "a b"`,
	} {
		err := Addrs(raw)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("Addrs(%q) = %v, want %q", raw, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "pw") {
			t.Errorf("Addrs(%q) repeats the password: %v", raw, err)
		}
	}
}
