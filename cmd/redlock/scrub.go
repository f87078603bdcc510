package main

import (
	"net/url"
	"strings"
	"sync"

	"github.com/quorumlock/redlock/driver/nodeurl"
)

// This file keeps the passwords of the node URLs out of everything the
// program writes.

// registerSecrets remembers the passwords of the URLs in s, a list
// separated by commas or white space (or "--nodes=" and such a list), so
// that they are never printed.
func registerSecrets(s string) {
	if _, v, ok := strings.Cut(s, "="); ok && strings.HasPrefix(s, "-") {
		s = v
	}
	for _, f := range splitList(s) {
		if !strings.Contains(f, "@") || addURLSecret(f) {
			continue
		}
		// Not a URL that parses with user information: hide what
		// nodeurl.Redact hides.
		if userinfo, ok := nodeurl.Userinfo(f); ok {
			if _, pw, ok := strings.Cut(userinfo, ":"); ok {
				addSecret(pw)
			} else {
				addSecret(userinfo)
			}
		}
	}
}

// addURLSecret remembers the password of raw, if it has one, and reports
// whether raw is a URL that parses with user information.
func addURLSecret(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return false
	}
	if p, ok := u.User.Password(); ok {
		addSecret(p)
	}
	return true
}

// shownURL returns a URL fit to print: without user information.
func shownURL(raw string) string {
	s, _ := nodeurl.Redact(raw)
	return s
}

// secrets are the passwords of the node URLs seen so far. Everything the
// program writes passes through scrub, so that a password cannot reach
// the output even through a library's error message.
var secrets struct {
	sync.Mutex
	list []string
}

func addSecret(s string) {
	if s == "" {
		return
	}
	secrets.Lock()
	defer secrets.Unlock()
	for _, x := range secrets.list {
		if x == s {
			return
		}
	}
	secrets.list = append(secrets.list, s)
	if u := url.QueryEscape(s); u != s {
		secrets.list = append(secrets.list, u)
	}
	if u := url.PathEscape(s); u != s {
		secrets.list = append(secrets.list, u)
	}
}

// scrub replaces every known password in s with "xxxxx".
func scrub(s string) string {
	secrets.Lock()
	defer secrets.Unlock()
	for _, p := range secrets.list {
		s = strings.ReplaceAll(s, p, "xxxxx")
	}
	return s
}

// A scrubWriter writes through to w with every known password replaced.
type scrubWriter struct {
	mu sync.Mutex
	w  interface{ Write([]byte) (int, error) }
}

func (s *scrubWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.w.Write([]byte(scrub(string(p)))); err != nil {
		return 0, err
	}
	return len(p), nil
}
