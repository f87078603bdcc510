// Package nodeurl holds what the adapters share about node URLs: reporting
// a URL that does not parse without repeating its password.
package nodeurl

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Error reports that parse rejected rawURL for reason err, prefixed with
// pkg, without repeating the user name or password. The reason could quote
// them: a character that should have been percent-encoded can make a
// parser cut the URL in the wrong place and quote a piece of the password
// as a port or a path. So when rawURL has user information, the reason
// given is the one parse gives for the URL with the user information
// replaced by "xxxxx", or, if that URL is accepted, that the user
// information is malformed.
func Error(pkg, rawURL string, err error, parse func(string) error) error {
	shown, redacted := Redact(rawURL)
	if redacted {
		if err = parse(shown); err == nil {
			return fmt.Errorf("%s: invalid URL %q: malformed user information "+
				"(characters such as / ? # @ %% in a user name or password must be percent-encoded)", pkg, shown)
		}
	}
	var uerr *url.Error
	if errors.As(err, &uerr) { // its text repeats the whole URL
		err = uerr.Err
	}
	return fmt.Errorf("%s: invalid URL %q: %w", pkg, shown, err)
}

// Redact replaces everything between "://" (or the start of s) and the
// last "@" with "xxxxx". It works on strings that are not valid URLs, where
// the user information cannot be told apart reliably; when in doubt it
// hides too much rather than too little.
func Redact(s string) (shown string, redacted bool) {
	start := 0
	if i := strings.Index(s, "://"); i >= 0 {
		start = i + len("://")
	}
	at := strings.LastIndex(s[start:], "@")
	if at < 0 {
		return s, false
	}
	return s[:start] + "xxxxx" + s[start+at:], true
}
