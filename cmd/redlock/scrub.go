package main

import (
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/quorumlock/redlock/driver/nodeurl"
)

// This file keeps the passwords of the node URLs out of everything the
// program writes.
//
// The commands print no URL but without its user information (shownURL),
// and name a URL that does not parse by its place in the list rather
// than repeat it. What is left is text that the program does not make
// itself: a flag parser that quotes the argument it could not parse, a
// library's error, a panic. For that text, the program remembers every
// argument, list entry and line that holds a URL's user information, and
// writes each in place of the whole with its user information hidden.
// It replaces whole URLs, never a password on its own wherever it
// appears, so that a password such as "e" or "3" leaves the words and
// numbers of the output alone. Only the message of a panic, about which
// nothing is known, has the passwords themselves hidden too.

// registerSecrets remembers the user information in s, an argument, a
// list of node URLs separated by commas or white space, or the lines of a
// file of them: s itself, the value of a "--flag=" argument, and each
// entry of the list, if it holds a URL's user information; and their
// passwords, learnt from s as a whole before it is split.
func registerSecrets(s string) {
	if !strings.Contains(s, "@") {
		return
	}
	secrets.Lock()
	defer secrets.Unlock()
	addWhole(s)
	if _, v, ok := strings.Cut(s, "="); ok && strings.HasPrefix(s, "-") {
		addWhole(v)
		s = v
	}
	for _, e := range splitList(s) {
		addWhole(e)
		addPasswords(e)
	}
	// A password with a separator in it was cut by splitList: its user
	// information runs from the scheme to the last "@" before the next URL.
	starts := schemeStarts(s)
	for k, p := range starts {
		end := len(s)
		if k+1 < len(starts) {
			end = starts[k+1]
		}
		region := strings.TrimRightFunc(s[p:end], isSeparator)
		addWhole(region)
		addPasswords(region)
	}
}

// addWhole remembers s, if it holds user information, to be written with
// that hidden. The caller holds secrets' lock.
func addWhole(s string) {
	if !strings.Contains(s, "@") || strings.TrimSpace(s) == "" {
		return
	}
	shown, _ := nodeurl.Redact(s)
	if shown == s || slices.Contains(secrets.whole, s) {
		return
	}
	secrets.whole = append(secrets.whole, s)
	secrets.shown = append(secrets.shown, shown)
	// The longest first, so that a list is replaced before its entries.
	for i := len(secrets.whole) - 1; i > 0 && len(secrets.whole[i]) > len(secrets.whole[i-1]); i-- {
		secrets.whole[i], secrets.whole[i-1] = secrets.whole[i-1], secrets.whole[i]
		secrets.shown[i], secrets.shown[i-1] = secrets.shown[i-1], secrets.shown[i]
	}
}

// addPasswords remembers the password of the URL s (the whole user
// information if it has no ":"), as written and percent-decoded. The
// caller holds secrets' lock.
func addPasswords(s string) {
	ui, ok := nodeurl.Userinfo(s)
	if !ok {
		return
	}
	pw := ui
	if _, p, ok := strings.Cut(ui, ":"); ok {
		pw = p
	}
	// With the pieces that a list's separators cut it into.
	for _, p := range append([]string{pw, unescape(pw)}, splitList(pw)...) {
		if p != "" && !slices.Contains(secrets.passwords, p) {
			secrets.passwords = append(secrets.passwords, p)
		}
	}
	// The longest first, so that a password is hidden before its pieces.
	slices.SortStableFunc(secrets.passwords, func(a, b string) int { return len(b) - len(a) })
}

func unescape(s string) string {
	if u, err := url.PathUnescape(s); err == nil {
		return u
	}
	return s
}

// shownURL returns a URL fit to print: without user information.
func shownURL(raw string) string {
	s, _ := nodeurl.Redact(raw)
	return s
}

// secrets is what the program has learnt of the user information in the
// node URLs.
var secrets struct {
	sync.Mutex
	whole     []string // text holding user information, longest first
	shown     []string // the same with the user information hidden
	passwords []string // for the message of a panic only
}

// scrub returns s with every remembered text that holds user information
// replaced by its form without it.
func scrub(s string) string {
	secrets.Lock()
	defer secrets.Unlock()
	for i, w := range secrets.whole {
		s = strings.ReplaceAll(s, w, secrets.shown[i])
	}
	return s
}

// scrubAll is scrub, and then every remembered password replaced with
// "xxxxx" wherever it is: for text about which nothing is known.
func scrubAll(s string) string {
	s = scrub(s)
	secrets.Lock()
	defer secrets.Unlock()
	for _, p := range secrets.passwords {
		s = strings.ReplaceAll(s, p, "xxxxx")
	}
	return s
}

// A scrubWriter writes through to w with scrub applied.
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
