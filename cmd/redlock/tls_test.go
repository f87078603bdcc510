package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/tlsfilestest"
)

// A tlsNodes is three redis-servers that speak TLS and, as Redis does by
// default, require client certificates of their CA, and the files of a
// client that they accept.
type tlsNodes struct {
	ca      *tlsfilestest.CA
	servers []*tlsfilestest.Redis
	dir     string
	caFile  string // the CA's certificate
	cert    string // a client certificate that the CA issued
	key     string // its key
}

func startTLSNodes(t *testing.T, cfg tlsfilestest.RedisConfig) *tlsNodes {
	t.Helper()
	ca := tlsfilestest.NewCA(t, "redlock test CA")
	if cfg.CA == nil {
		cfg.CA = ca
	}
	tn := &tlsNodes{ca: cfg.CA, dir: t.TempDir()}
	for range 3 {
		tn.servers = append(tn.servers, tlsfilestest.StartRedis(t, cfg))
	}
	tn.caFile = tn.ca.Write(t, tn.dir)
	tn.cert, tn.key = tn.ca.Issue(t, tlsfilestest.Leaf{CommonName: "locker", Client: true}).WriteTo(t,
		filepath.Join(tn.dir, "client.crt"), filepath.Join(tn.dir, "client.key"))
	return tn
}

// nodes returns --nodes=rediss://...,...
func (tn *tlsNodes) nodes() string {
	urls := make([]string, len(tn.servers))
	for i, s := range tn.servers {
		urls[i] = s.URL()
	}
	return "--nodes=" + strings.Join(urls, ",")
}

// flags returns the TLS flags of a client that the nodes accept.
func (tn *tlsNodes) flags() []string {
	return []string{"--cacert", tn.caFile, "--cert", tn.cert, "--key", tn.key}
}

// args returns the TLS flags and --nodes, then more.
func (tn *tlsNodes) args(more ...string) []string {
	return append(append(tn.flags(), tn.nodes()), more...)
}

// Every command works over mutual TLS: run (which extends its lock while
// its command runs), inspect and status, release and doctor; with the
// flags and with their environment variables.
func TestTLSMutual(t *testing.T) {
	t.Parallel()
	tn := startTLSNodes(t, tlsfilestest.RedisConfig{})

	r := run(t, append([]string{"run", "--no-quarantine"}, tn.args("k", "--", "sh", "-c", `echo "fence=$REDLOCK_FENCE"`)...)...)
	expect(t, r, 0, "fence=")
	expect(t, run(t, tn.args("inspect", "k")...), 0, `lock "k": FREE (3 of 3 nodes answered, quorum 2)`)

	// A run that holds the lock, extending it every third of its TTL,
	// until the lock is removed from under it.
	dir := t.TempDir()
	p := start(t, dir, nil, append([]string{"run", "--no-quarantine", "--ttl", "1500ms"},
		tn.args("held", "--", "sh", "-c", `touch started; while true; do sleep 0.05; done`)...)...)
	waitFor(t, 30*time.Second, "the command to start", func() bool { return fileExists(filepath.Join(dir, "started")) || p.exited() })
	expect(t, run(t, append([]string{"status", "--no-quarantine"}, tn.args("held")...)...), 0, `lock "held": HELD by `)
	// An extension shows as a TTL longer than one read before it, on a
	// server that holds the key (a quorum does; a server that answered
	// the acquisition late may not).
	pttl := func(s *tlsfilestest.Redis) int64 {
		v, _ := s.Do("PTTL", "held")
		ms, _ := v.(int64)
		return ms
	}
	var before []int64
	for _, s := range tn.servers {
		before = append(before, pttl(s))
	}
	waitFor(t, 30*time.Second, "an extension", func() bool {
		for i, s := range tn.servers {
			if pttl(s) > before[i] {
				return true
			}
		}
		return p.exited()
	})
	r = run(t, append([]string{"release", "--force", "--yes"}, tn.args("held")...)...)
	expect(t, r, 0, "removed")
	expect(t, p.wait(), exitLockLost, "LOST the lock")

	// The same from the environment, for doctor.
	env := []string{"REDLOCK_CACERT=" + tn.caFile, "REDLOCK_CERT=" + tn.cert, "REDLOCK_CERT_KEY=" + tn.key}
	r = runIn(t, t.TempDir(), env, "doctor", tn.nodes())
	expect(t, r, 0, "HEALTHY: 3 of 3 nodes healthy", "TLS 1.3", `server certificate "CN=redis server,O=redlock tests"`,
		`verified for "127.0.0.1"`, `client certificate "CN=locker,O=redlock tests"`)
	if strings.Contains(r.stdout, "WARN") || strings.Contains(r.stdout, "ERROR") {
		t.Fatalf("warnings on healthy TLS nodes:\n%s", r)
	}
	r = runIn(t, t.TempDir(), env, "doctor", "--json", tn.nodes())
	var rep doctorReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, r)
	}
	for _, n := range rep.Nodes {
		if n.TLS == nil || n.TLS.Version != "TLS 1.3" || !n.TLS.Verified || n.TLS.ServerExpires == nil ||
			n.TLS.ClientSubject != "CN=locker,O=redlock tests" || n.TLS.ClientExpires == nil {
			t.Fatalf("doctor --json: TLS of %s: %+v", n.Node, n.TLS)
		}
	}
	// A flag wins over its variable.
	r = runIn(t, t.TempDir(), []string{"REDLOCK_CACERT=/nonexistent/ca.crt", "REDLOCK_CERT=" + tn.cert, "REDLOCK_CERT_KEY=" + tn.key},
		"inspect", "--cacert", tn.caFile, tn.nodes(), "k")
	expect(t, r, 0, "FREE")
}

// Each set-up that cannot work ends run at once, without --wait (it would
// otherwise wait until killed), with status 78, the reason and the flag
// that fixes it; doctor and inspect say the same.
func TestTLSRefusals(t *testing.T) {
	t.Parallel()
	tn := startTLSNodes(t, tlsfilestest.RedisConfig{})
	other := tlsfilestest.NewCA(t, "other CA")
	otherCA := other.Write(t, tn.dir)
	strangerCert, strangerKey := other.Issue(t, tlsfilestest.Leaf{CommonName: "stranger", Client: true}).Write(t, tn.dir)
	oldCert, oldKey := tn.ca.Issue(t, tlsfilestest.Leaf{CommonName: "old", Client: true,
		NotBefore: time.Now().Add(-72 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)}).Write(t, tn.dir)
	expired := startTLSNodes(t, tlsfilestest.RedisConfig{CA: tn.ca, Cert: tn.ca.Issue(t, tlsfilestest.Leaf{CommonName: "old server",
		Server: true, Client: true, NotBefore: time.Now().Add(-72 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)})})

	for _, tc := range []struct {
		name  string
		args  []string
		wants []string
	}{
		{"no CA", []string{"--cert", tn.cert, "--key", tn.key, tn.nodes()},
			[]string{"certificate signed by unknown authority", `CA (CN=redlock test CA,O=redlock tests) that this machine does not trust: pass --cacert`}},
		{"wrong CA", []string{"--cacert", otherCA, "--cert", tn.cert, "--key", tn.key, tn.nodes()},
			[]string{"certificate signed by unknown authority", "pass --cacert"}},
		{"no client certificate", []string{"--cacert", tn.caFile, tn.nodes()},
			[]string{"tls: certificate required", "the server asks for a client certificate: pass --cert and --key"}},
		{"untrusted client certificate", []string{"--cacert", tn.caFile, "--cert", strangerCert, "--key", strangerKey, tn.nodes()},
			[]string{"unknown certificate authority", "does not accept the client certificate of --cert"}},
		{"expired client certificate", []string{"--cacert", tn.caFile, "--cert", oldCert, "--key", oldKey, tn.nodes()},
			[]string{"expired certificate", "refuses the client certificate of --cert as expired"}},
		{"wrong server name", append(tn.flags(), "--sni", "redis.example", tn.nodes()),
			[]string{`not valid for "redis.example", only for localhost, 127.0.0.1: connect with a name it holds, or pass --sni NAME`}},
		{"expired server certificate", append(tn.flags(), expired.nodes()),
			[]string{"certificate has expired", "the node's certificate has expired, or is not valid yet", "renew the server's certificate"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"run", "--no-quarantine"}, tc.args...)
			r := run(t, append(args, "k", "--", "echo", "must not run")...)
			expect(t, r, exitConfig, append([]string{"cannot be acquired", "3 of 3 nodes refused it"}, tc.wants...)...)
			if strings.Contains(r.stdout, "must not run") || strings.Contains(r.stderr, "waiting for the lock") || strings.Contains(r.stderr, "unreachable") {
				t.Fatalf("run waited, or called a refusal unreachable:\n%s", r)
			}
			r = run(t, append([]string{"doctor"}, tc.args...)...)
			expect(t, r, exitNoQuorum, append([]string{"ERROR  access"}, tc.wants[len(tc.wants)-1])...)
			r = run(t, append([]string{"inspect"}, append(tc.args, "k")...)...)
			expect(t, r, exitConfig, tc.wants[len(tc.wants)-1])
		})
	}
}

// Settings that cannot work are usage errors, found before any node is
// asked; --insecure, which must be stated, is warned about on every run.
func TestTLSUsage(t *testing.T) {
	t.Parallel()
	tn := startTLSNodes(t, tlsfilestest.RedisConfig{AuthClients: "no"})
	missing := filepath.Join(tn.dir, "missing.crt")
	junk := filepath.Join(tn.dir, "junk.pem")
	// Files that are not files: a named pipe nobody writes to, and one
	// above the size limit.
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(big, make([]byte, 1<<20+1), 0o600); err != nil {
		t.Fatal(err)
	}
	tlsfilestest.WriteFile(t, junk, []byte("junk\n"))
	for _, tc := range []struct {
		args []string
		env  []string
		want string
	}{
		{args: []string{"--cert", tn.cert, tn.nodes()}, want: "--cert needs the certificate's private key: give --key too"},
		{args: []string{"--key", tn.key, tn.nodes()}, want: "--key needs its certificate"},
		{args: []string{tn.nodes()}, env: []string{"REDLOCK_CERT=" + tn.cert}, want: "$REDLOCK_CERT needs the certificate's private key"},
		{args: []string{"--insecure", "--cacert", tn.caFile, tn.nodes()}, want: "--insecure and --cacert contradict each other"},
		{args: []string{"--cacert", tn.caFile, "--nodes=redis://" + tn.servers[0].Addr()}, want: "--cacert set up TLS, but no node URL asks for it: use rediss://"},
		{args: []string{"--nodes=redis://" + tn.servers[0].Addr()}, env: []string{"REDLOCK_SNI=x"}, want: "$REDLOCK_SNI set up TLS, but no node URL"},
		{args: []string{"--nodes=" + tn.servers[0].URL() + "?skip_verify=true"}, want: "turns certificate verification off (skip_verify=true): give --insecure to confirm"},
		{args: []string{"--cacert", missing, tn.nodes()}, want: "--cacert: open " + missing + ": no such file or directory"},
		{args: []string{"--cacert", "/dev/zero", tn.nodes()}, want: "--cacert: read /dev/zero: not a regular file (a character device)"},
		{args: []string{"--cacert", tn.caFile, "--cert", t.TempDir(), "--key", tn.cert, tn.nodes()}, want: "--cert: read /tmp/"},
		{args: []string{"--cacert", tn.caFile, "--cert", tn.cert, "--key", fifo, tn.nodes()}, want: "--key: read " + fifo + ": not a regular file (a named pipe)"},
		{args: []string{"--cacertdir", tn.caFile, tn.nodes()}, want: "--cacertdir: " + tn.caFile + " is not a directory"},
		{args: []string{"--nodes-file", fifo}, want: "--nodes-file: read " + fifo + ": not a regular file (a named pipe)"},
		{args: []string{"--nodes-file", "/dev/zero"}, want: "--nodes-file: read /dev/zero: not a regular file"},
		{args: []string{"--nodes-file", big}, want: "--nodes-file: read " + big + ": 1048577 bytes, more than the 1048576"},
		{args: []string{}, env: []string{"REDLOCK_NODES_FILE=" + fifo}, want: "$REDLOCK_NODES_FILE: read " + fifo + ": not a regular file"},
		{args: []string{"--cacert", junk, tn.nodes()}, want: "CA file " + junk + " holds no PEM certificate"},
		{args: []string{"--cacert", tn.caFile, "--cert", tn.cert, "--key", junk, tn.nodes()}, want: "client certificate " + tn.cert + " and key " + junk},
		{args: []string{tn.nodes()}, env: []string{"REDLOCK_INSECURE=maybe"}, want: `$REDLOCK_INSECURE="maybe": want 1, true, 0 or false`},
	} {
		tc := tc
		for _, cmd := range [][]string{{"doctor"}, {"inspect", "k"}, {"run", "k", "--", "true"}, {"release", "--force", "--yes", "k"}, {"demo", "--workers", "1"}} {
			args := append(append(cmd[:1:1], tc.args...), cmd[1:]...)
			r := runIn(t, t.TempDir(), tc.env, args...)
			expect(t, r, exitUsage, tc.want)
		}
	}

	// The nodes' certificates are not verified with --insecure, and a
	// warning says so on every run; a URL's skip_verify=true needs it too.
	for _, args := range [][]string{
		{"--insecure", tn.nodes(), "inspect", "k"},
		{"--insecure", "--nodes=" + tn.servers[0].URL() + "?skip_verify=true", "inspect", "k"},
	} {
		for range 2 {
			r := run(t, args...)
			expect(t, r, 0, "FREE")
			if !strings.Contains(r.stderr, "WARNING: --insecure: the TLS certificates of the nodes are not verified") {
				t.Fatalf("no warning for --insecure:\n%s", r)
			}
		}
	}
	r := runIn(t, t.TempDir(), []string{"REDLOCK_INSECURE=1"}, "doctor", tn.nodes())
	expect(t, r, exitFailure, "WARNING: $REDLOCK_INSECURE", "NOT verified (--insecure)")
	// Without it, the unknown CA is refused.
	expect(t, run(t, "inspect", tn.nodes(), "k"), exitConfig, "pass --cacert")
	// An explicit --insecure=false wins over the variable.
	expect(t, runIn(t, t.TempDir(), []string{"REDLOCK_INSECURE=1"}, "inspect", "--insecure=false", tn.nodes(), "k"), exitConfig, "pass --cacert")
}

// Doctor warns about a server certificate that expires within 14 days.
func TestTLSDoctorExpiringCertificate(t *testing.T) {
	t.Parallel()
	ca := tlsfilestest.NewCA(t, "redlock test CA")
	tn := startTLSNodes(t, tlsfilestest.RedisConfig{CA: ca, Cert: ca.Issue(t, tlsfilestest.Leaf{CommonName: "redis server",
		Server: true, Client: true, NotAfter: time.Now().Add(5*24*time.Hour + time.Hour)})})
	r := run(t, tn.args("doctor")...)
	expect(t, r, exitFailure, "WARN   tls", "the server's certificate expires in 5 days: renew it", "USABLE WITH WARNINGS")
}

// A long run picks up a client certificate rotated on disk: the new one
// is of another CA, which the servers then trust alone, and every client
// connection is closed. The run goes on extending its lock through new
// connections, which can only be made with the new certificate, and its
// command finishes under the lock.
func TestTLSRunRotation(t *testing.T) {
	t.Parallel()
	tn := startTLSNodes(t, tlsfilestest.RedisConfig{})
	next := tlsfilestest.NewCA(t, "next CA")
	dir := t.TempDir()
	p := start(t, dir, nil, append([]string{"run", "--no-quarantine", "--ttl", "1500ms"},
		tn.args("rotated", "--", "sh", "-c", `touch started; while [ ! -e stop ]; do sleep 0.05; done; echo "done under $REDLOCK_LOCK_ID"`)...)...)
	waitFor(t, 30*time.Second, "the command to start", func() bool { return fileExists(filepath.Join(dir, "started")) || p.exited() })
	// Every server has a connection from the run once one of its
	// extensions has reached them all.
	waitFor(t, 30*time.Second, "a connection to every server", func() bool {
		for _, s := range tn.servers {
			v, _ := s.Do("CLIENT", "LIST", "TYPE", "normal")
			if list, _ := v.(string); strings.Count(list, "\n") < 2 { // this Do's own connection and the run's
				return false
			}
		}
		return true
	})

	next.Issue(t, tlsfilestest.Leaf{CommonName: "locker v2", Client: true}).WriteTo(t, tn.cert, tn.key)
	var ttls []int64
	for _, s := range tn.servers {
		s.TrustClientsOf(t, next)
		s.KillClients(t)
		v, _ := s.Do("PTTL", "rotated")
		ms, _ := v.(int64)
		ttls = append(ttls, ms)
	}
	// An extension after the connections were closed shows on the
	// servers as a TTL longer than the one left then.
	waitFor(t, 30*time.Second, "an extension through new connections", func() bool {
		extended := 0
		for i, s := range tn.servers {
			v, _ := s.Do("PTTL", "rotated")
			if ms, _ := v.(int64); ms > ttls[i] {
				extended++
			}
		}
		return extended >= 2 || p.exited()
	})
	if p.exited() {
		t.Fatalf("run ended after the rotation:\n%s", p.wait())
	}
	// Another client with the rotated files sees the lock held; one with
	// a certificate of the old CA is refused now.
	expect(t, run(t, append([]string{"inspect", "--no-quarantine"}, tn.args("rotated")...)...), 0, `lock "rotated": HELD by `)
	oldCert, oldKey := tn.ca.Issue(t, tlsfilestest.Leaf{CommonName: "locker v1", Client: true}).Write(t, t.TempDir())
	r := run(t, "inspect", "--cacert", tn.caFile, "--cert", oldCert, "--key", oldKey, tn.nodes(), "rotated")
	expect(t, r, exitConfig, "does not accept the client certificate of --cert")

	if err := os.WriteFile(filepath.Join(dir, "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	expect(t, p.wait(), 0, "done under ")
}

// A cluster reached over mutual TLS: doctor reports the TLS of each
// master, and run takes its lock through the cluster.
func TestTLSCluster(t *testing.T) {
	t.Parallel()
	ca := tlsfilestest.NewCA(t, "redlock test CA")
	srv := tlsfilestest.StartRedis(t, tlsfilestest.RedisConfig{CA: ca, Cluster: true})
	srv.Cluster(t)
	dir := t.TempDir()
	cert, key := ca.Issue(t, tlsfilestest.Leaf{CommonName: "locker", Client: true}).Write(t, dir)
	args := []string{"--cacert", ca.Write(t, dir), "--cert", cert, "--key", key, "--nodes", srv.URL() + "?cluster=true"}

	r := run(t, append([]string{"doctor"}, args...)...)
	expect(t, r, 0, "cluster_state ok: all 16384 slots served by 1 master(s)", // A cluster of one master does not know its own IP address:
		// CLUSTER SLOTS names it by its port alone.
		":"+strings.TrimPrefix(srv.TLSAddr, "127.0.0.1:")+" (slots 0-16383)",
		"TLS 1.3", `verified for "127.0.0.1"`, `client certificate "CN=locker,O=redlock tests"`)
	r = run(t, append(append([]string{"run", "--no-quarantine"}, args...), "k", "--", "echo", "ran")...)
	expect(t, r, 0, "ran")
}
