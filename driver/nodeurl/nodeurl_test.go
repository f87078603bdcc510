package nodeurl

import (
	"errors"
	"net/url"
	"strings"
	"testing"
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
