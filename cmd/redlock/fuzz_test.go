package main

import (
	"io"
	"net"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// FuzzCommandLine parses "redlock --nodes=N --quarantine=Q run --ttl=T
// --wait=W KEY -- COMMAND" as the program does, and goes as far as it does
// before it first talks to a node: the node list, the options, every URL
// parsed and dialled, and the lock client made. It checks that the flags
// parse exactly when their durations do, into the values
// time.ParseDuration gives; that the node list is the input split at its
// separators; that every failure is a usage error; and that every password
// in the node URLs is registered, so that nothing the program writes can
// show it.
func FuzzCommandLine(f *testing.F) {
	for _, c := range [][4]string{
		// Node lists, with valid durations.
		{"redis://127.0.0.1:6379", "0", "10s", "0"},
		{"redis://a:1,redis://b:2 redis://c:3", "1m", "2s", "1h30m"},
		{"redis://u:s3cret@h:1/2,rediss://:p%40ss@h:2,unix://u:p@/run/redis.sock?db=3", "0", "1s", "0"},
		{"redis://u:12345/secret@h:6379", "0", "1s", "0"},
		{"user:hunter2@redis://h:6379", "0", "1s", "0"},
		{"//a:pw@b://c@d", "0", "1s", "0"},
		{"redis://h:1,redis://h:1", "0", "1s", "0"},
		{"redis://127.0.0.1:1,redis://u:p@[::1]:2/3 unix:///tmp/x.sock", "0", "1s", "0"},
		{"redis://127.0.0.1:1,redis://127.0.0.1:1", "0", "1s", "0"},
		{"redis://u:p@h:port", "0", "1s", "0"},
		{",, \t\n", "0s", "10s", "0s"},
		{"", "0", "1s", "0"},
		// Durations.
		{"redis://h", "-1s", "0", "-5ms"},
		{"redis://h", "5", "-", "+3s"},
		{"redis://h", "1ns", "9223372036s", "1us"},
		{"redis://h", "10µs", "2h45m", ".5m"},
	} {
		f.Add(c[0], c[1], c[2], c[3])
	}
	f.Fuzz(func(t *testing.T, nodes, quarantine, ttl, wait string) {
		secrets.Lock()
		whole, shown, pws := slices.Clone(secrets.whole), slices.Clone(secrets.shown), slices.Clone(secrets.passwords)
		secrets.Unlock()
		defer func() {
			secrets.Lock()
			secrets.whole, secrets.shown, secrets.passwords = whole, shown, pws
			secrets.Unlock()
		}()

		args := []string{"--nodes=" + nodes, "--quarantine=" + quarantine, "--ttl=" + ttl, "--wait=" + wait, "key", "--", "true"}
		// As execute and the flag --nodes do.
		for _, a := range args {
			if strings.Contains(a, "://") {
				registerSecrets(a)
			}
		}
		registerSecrets(nodes)
		leaks := func(what, s string) {
			t.Helper()
			for _, p := range passwords(nodes) {
				// The scrubber hides whole URLs, not a password wherever
				// it is: a short one, or one the other flags' values hold,
				// can be in a message by chance.
				if len(p) < 4 || strings.Contains(quarantine+" "+ttl+" "+wait, p) {
					continue
				}
				if strings.Contains(scrub(s), p) {
					t.Fatalf("%s shows the password %q: %q", what, p, scrub(s))
				}
			}
		}

		root := newRootCmd(io.Discard, io.Discard)
		run, _, err := root.Find([]string{"run"})
		if err != nil {
			t.Fatal(err)
		}
		wantQ, errQ := time.ParseDuration(quarantine)
		wantT, errT := time.ParseDuration(ttl)
		wantW, errW := time.ParseDuration(wait)
		err = run.ParseFlags(args)
		if (err != nil) != (errQ != nil || errT != nil || errW != nil) {
			t.Fatalf("ParseFlags(%q) = %v; durations %v %v %v", args, err, errQ, errT, errW)
		}
		if err != nil {
			leaks("the flag error", err.Error())
			return
		}
		for name, want := range map[string]time.Duration{"quarantine": wantQ, "ttl": wantT, "wait": wantW} {
			if got, err := run.Flags().GetDuration(name); err != nil || got != want {
				t.Fatalf("--%s=%q parsed as %v, %v; want %v", name, map[string]string{"quarantine": quarantine, "ttl": ttl, "wait": wait}[name], got, err, want)
			}
		}
		list := *root.PersistentFlags().Lookup("nodes").Value.(*urlList)
		if len(list) != 1 || list[0] != nodes {
			t.Fatalf("--nodes=%q parsed as %q", nodes, list)
		}
		leaks("--nodes in the help text", root.PersistentFlags().Lookup("nodes").Value.String())

		nf := &nodeFlags{nodes: list, quarantine: wantQ}
		urls, err := nf.urls()
		want := strings.FieldsFunc(nodes, func(r rune) bool { return strings.ContainsRune(", \t\n\r", r) })
		if len(want) == 0 || err != nil {
			// No URL, a password cut by a separator, or a URL that
			// does not parse.
			if exitCode(err) != exitUsage {
				t.Fatalf("urls() of %q = %q, %v; want a usage error", nodes, urls, err)
			}
			leaks("the error of urls", err.Error())
			return
		}
		if !slices.Equal(urls, want) {
			t.Fatalf("urls() of %q = %q, %v; want %q", nodes, urls, err, want)
		}

		_, err = nf.options()
		if (err != nil) != (wantQ < 0) || err != nil && exitCode(err) != exitUsage {
			t.Fatalf("options() with --quarantine %v: %v", wantQ, err)
		}
		if err != nil {
			return
		}
		local := true
		for _, u := range urls {
			opt, err := redis.ParseURL(u)
			if err != nil {
				// dialNode fails before it makes a client.
				_, err := dialNode(u)
				if exitCode(err) != exitUsage {
					t.Fatalf("dialNode(%q) = %v, not a usage error", u, err)
				}
				leaks("the error of dialNode", err.Error())
				return
			}
			local = local && isLocal(opt.Network, opt.Addr)
		}
		if !local {
			// Only local addresses go further, so that nothing the
			// fuzzer makes can send a name to DNS.
			return
		}
		// Nothing below talks to a node: Dial does not connect.
		ns, c, err := nf.connect(0)
		if err != nil {
			if exitCode(err) != exitUsage {
				t.Fatalf("connect(%q) = %v, not a usage error", urls, err)
			}
			leaks("the error of connect", err.Error())
			return
		}
		defer ns.close()
		if c == nil || len(ns.names) != len(urls) || len(ns.nodes) != len(urls) {
			t.Fatalf("connect(%q) made %d nodes named %q", urls, len(ns.nodes), ns.names)
		}
		leaks("the node names", strings.Join(ns.names, " "))
	})
}

// passwords returns the passwords in the node list s that the program must
// never show: those that a URL parser finds in each URL, or, for a URL in
// which it finds no user information, what lies between the first ":"
// and the last "@" after a leading "scheme://" (so that a password
// before the scheme, as in "user:pass@redis://host", counts too).
// Passwords with an "x" in them are left out, since scrub replaces a
// password with "xxxxx" and its own output could make them reappear.
func passwords(s string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return strings.ContainsRune(", \t\n", r) }) {
		var p string
		if u, err := url.Parse(f); err == nil && u.User != nil {
			p, _ = u.User.Password()
		} else if at := strings.LastIndex(f, "@"); at >= 0 {
			ui := f[:at]
			if scheme, rest, ok := strings.Cut(ui, "://"); ok && scheme != "" && strings.Trim(scheme, "abcdefghijklmnopqrstuvwxyz") == "" {
				ui = rest
			}
			_, p, _ = strings.Cut(ui, ":")
		}
		if p != "" && !strings.Contains(p, "x") {
			out = append(out, p)
		}
	}
	return out
}

// isLocal reports whether a node at addr on network can be dialled
// without a DNS lookup and without reaching another host.
func isLocal(network, addr string) bool {
	if network == "unix" {
		return true
	}
	host, _, err := net.SplitHostPort(addr)
	ip := net.ParseIP(host)
	return err == nil && ip != nil && ip.IsLoopback()
}
