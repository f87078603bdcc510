package drivertest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/driver"
	"github.com/quorumlock/redlock/internal/redistest"
)

func testDialServerDown[N Node](t *testing.T, a Adapter[N]) {
	srv := redistest.Start(t, redistest.Config{})
	url := srv.URL()
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	n, err := a.Dial(url)
	if err != nil {
		t.Fatalf("Dial with the server down: %v", err)
	}
	defer n.Close()
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("Dial took %v", d)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start = time.Now()
	if got, err := eval(ctx, n, acquireStep("lock:down", "tok", "1000", nil)); err == nil {
		t.Fatalf("Eval with the server down = %#v, want an error", got)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Eval with the server down took %v with a 500ms deadline", d)
	}

	// Once the server is back, the node works.
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx := ctxTimeout(t, time.Second)
		got, err := eval(ctx, n, acquireStep("lock:down", "tok", "1000", nil))
		if err == nil {
			if status, _ := Status(got); status != granted {
				t.Fatalf("acquire = %#v", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Eval after restart: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// testDialServerPaused checks that Dial does not wait for a server that
// accepts connections but does not answer, and that Eval then gives up at
// its deadline while connecting.
func testDialServerPaused[N Node](t *testing.T, a Adapter[N]) {
	srv := redistest.Start(t, redistest.Config{})
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	defer srv.Resume()
	start := time.Now()
	n := dial(t, a, srv.URL())
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("Dial took %v", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start = time.Now()
	if got, err := eval(ctx, n, acquireStep("lock:paused", "tok", "1000", nil)); err == nil {
		t.Fatalf("Eval on a paused server = %#v, want an error", got)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Eval on a paused server took %v with a 300ms deadline", d)
	}
}

// testDialDoesNotRetry checks that a dialled client reports a lost reply
// instead of sending the command again.
func testDialDoesNotRetry[N Node](t *testing.T, a Adapter[N]) {
	srv := redistest.Start(t, redistest.Config{})
	proxy := redistest.StartProxy(t, srv)
	release := Script(t, "release")
	srv.MustDo(t, "SCRIPT", "LOAD", release.Source()) // so that EVALSHA applies it
	n := dial(t, a, proxy.URL())
	run(t, n, []step{acquireStep("lock:noretry", "tok", "60000", granted)})

	proxy.DropReplies(1, func(args []string) bool { return Runs(args, release) })
	ctx := ctxTimeout(t, 5*time.Second)
	if got, err := eval(ctx, n, releaseStep("lock:noretry", "tok", nil)); err == nil {
		t.Fatalf("release with its reply lost = %#v, want an error", got)
	}
	if d := proxy.Dropped(); d != 1 {
		t.Fatalf("proxy dropped %d replies, want 1", d)
	}
	// The release was applied once; the node works again afterwards.
	run(t, n, []step{releaseStep("lock:noretry", "tok", absent)})
}

// testNames dials URLs of every form without connecting, and checks the
// names, the adapter's own checks and that Close may be called twice.
func testNames[N Node](t *testing.T, a Adapter[N]) {
	for _, tt := range []struct {
		url        string
		name       string
		serverName string // for TLS; "" without
	}{
		{url: "redis://127.0.0.1:6379", name: "127.0.0.1:6379/0"},
		{url: "redis://h", name: "h:6379/0"},
		{url: "redis://user:pw@h:7000/5", name: "h:7000/5"},
		{url: "redis://[::1]:7000/5", name: "[::1]:7000/5"},
		{url: "rediss://user:pw@redis.example:6380/2", name: "redis.example:6380/2", serverName: "redis.example"},
		{url: "unix:///tmp/x/redis.sock", name: "/tmp/x/redis.sock/0"},
		{url: "unix://user:pw@/tmp/x/redis.sock?db=3", name: "/tmp/x/redis.sock/3"},
		{url: "redis://h?max_retries=5", name: "h:6379/0"},
	} {
		n, err := a.Dial(tt.url)
		if err != nil {
			t.Errorf("Dial(%q): %v", tt.url, err)
			continue
		}
		if n.Name() != tt.name {
			t.Errorf("Dial(%q).Name() = %q, want %q", tt.url, n.Name(), tt.name)
		}
		a.CheckDialled(t, Dialled[N]{URL: tt.url, Node: n, TLSServerName: tt.serverName})
		if err := n.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := n.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
	}
}

// testURLs runs a script through every URL form against real servers and
// checks the database that the key lands in.
func testURLs[N Node](t *testing.T, a Adapter[N]) {
	tcp := redistest.Start(t, redistest.Config{})
	unix := redistest.Start(t, redistest.Config{Unix: true})
	addUser(t, tcp)
	addUser(t, unix)
	hostPort := strings.TrimPrefix(tcp.URL(), "redis://")
	sock := strings.TrimPrefix(unix.URL(), "unix://")
	creds := ACLUser + ":" + ACLPassword + "@"

	for _, tt := range []struct {
		name string
		srv  *redistest.Server
		url  string
		db   int
		want string // Name()
	}{
		{"tcp", tcp, "redis://" + hostPort, 0, hostPort + "/0"},
		{"tcp db", tcp, "redis://" + hostPort + "/3", 3, hostPort + "/3"},
		{"tcp db query", tcp, "redis://" + hostPort + "?db=4", 4, hostPort + "/4"},
		{"tcp acl", tcp, "redis://" + creds + hostPort + "/5", 5, hostPort + "/5"},
		{"unix", unix, "unix://" + sock, 0, sock + "/0"},
		{"unix db", unix, "unix://" + sock + "?db=6", 6, sock + "/6"},
		{"unix acl", unix, "unix://" + creds + sock + "?db=7", 7, sock + "/7"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.srv.Network() == "unix" && !strings.HasPrefix(tt.srv.URL(), "unix:///") {
				t.Fatalf("unexpected unix URL %q", tt.srv.URL())
			}
			n := dial(t, a, tt.url)
			CheckName(t, n.Name(), tt.want)
			key := "lock:url:" + tt.name
			run(t, n, []step{acquireStep(key, "tok", "60000", granted)})
			if !inDB(t, tt.srv, tt.db, key) {
				t.Errorf("key is not in database %d", tt.db)
			}
			if tt.db != 0 && inDB(t, tt.srv, 0, key) {
				t.Errorf("key is in database 0, want only %d", tt.db)
			}
		})
	}
}

func testWrongPassword[N Node](t *testing.T, a Adapter[N]) {
	srv := redistest.Start(t, redistest.Config{Unix: true})
	addUser(t, srv)
	const wrong = "wrongpassword123"
	for _, url := range []string{
		"unix://" + ACLUser + ":" + wrong + "@" + strings.TrimPrefix(srv.URL(), "unix://"),
		"unix://nosuchuser:" + wrong + "@" + strings.TrimPrefix(srv.URL(), "unix://"),
	} {
		n := dial(t, a, url)
		if strings.Contains(n.Name(), wrong) {
			t.Errorf("Name() = %q contains the password", n.Name())
		}
		ctx := ctxTimeout(t, 5*time.Second)
		got, err := eval(ctx, n, acquireStep("lock:pw", "tok", "1000", nil))
		if err == nil {
			t.Fatalf("Eval with a wrong password = %#v, want an error", got)
		}
		if strings.Contains(err.Error(), wrong) {
			t.Errorf("error %q contains the password", err)
		}
		if reply := (*driver.ReplyError)(nil); !errors.As(err, &reply) || reply.Code() != "WRONGPASS" {
			t.Errorf("error %q (%T), want a *driver.ReplyError with the code WRONGPASS", err, err)
		}
	}
}

// testPasswordOnly covers redis://:password@host, which authenticates as
// the default user.
func testPasswordOnly[N Node](t *testing.T, a Adapter[N]) {
	srv := redistest.Start(t, redistest.Config{})
	hostPort := strings.TrimPrefix(srv.URL(), "redis://")
	srv.MustDo(t, "CONFIG", "SET", "requirepass", ACLPassword) // srv.Do stops working here
	n := dial(t, a, "redis://:"+ACLPassword+"@"+hostPort+"/1")
	CheckName(t, n.Name(), hostPort+"/1")
	run(t, n, []step{acquireStep("lock:pw", "tok", "60000", granted)})

	n = dial(t, a, "redis://"+hostPort+"/1")
	if _, err := eval(ctxTimeout(t, 5*time.Second), n, acquireStep("lock:pw", "tok", "60000", nil)); err == nil {
		t.Error("Eval without the password succeeded")
	}
}

func testBadURLs[N Node](t *testing.T, a Adapter[N]) {
	const pw = ACLPassword
	urls := []string{
		"",
		"localhost:6379",
		"127.0.0.1:6379",
		"http://u:" + pw + "@h:6379",
		"redis://u:" + pw + "@h:6379/x",
		"redis://u:" + pw + "@h:6379/1/2",
		"redis://u:" + pw + "@h:port",
		"redis://u:" + pw + "@h:6379/0?dial_timeout=later",
		"redis://u:hunter2/secret@h:6379",  // "/" must be escaped
		"redis://u:hunter2#secret@h:6379",  // "#" must be escaped
		"redis://u:hunter2?secret@h:6379",  // "?" must be escaped
		"redis://u:hunter%zzsecret@h:6379", // bad escape
		"redis://u:12345/secret@h:6379",    // parses, with "u:12345" as the host
		"redis://u:" + pw + "@h\x7f:6379",
		"u:" + pw + "@h:6379",
		"unix://u:" + pw + "@",
		"unix://u:" + pw + "@/tmp/redis.sock?db=x",
	}
	for _, url := range append(urls, a.BadURLs...) {
		n, err := a.Dial(url)
		if err == nil {
			n.Close()
			t.Errorf("Dial(%q) succeeded", url)
			continue
		}
		msg := err.Error()
		if strings.Contains(msg, "hunter") || strings.Contains(msg, "secret") {
			t.Errorf("Dial(%q) error %q reveals the password", url, msg)
		}
		if !strings.HasPrefix(msg, a.Pkg+": invalid URL") || !errors.Is(err, redlock.ErrInvalid) {
			t.Errorf("Dial(%q) error %q (ErrInvalid: %v)", url, msg, errors.Is(err, redlock.ErrInvalid))
		}
		t.Logf("%q: %v", url, err)
	}
}
