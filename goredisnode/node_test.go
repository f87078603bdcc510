package goredisnode_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/goredisnode"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// exampleURLs are the URLs of the three servers that TestMain starts for
// the examples.
var exampleURLs []string

func TestMain(m *testing.M) {
	var servers []*redistest.Server
	for range 3 {
		srv, err := redistest.New(redistest.Config{})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		servers = append(servers, srv)
		exampleURLs = append(exampleURLs, srv.URL())
	}
	code := m.Run()
	for _, srv := range servers {
		srv.Close()
	}
	os.Exit(code)
}

func script(t testing.TB, name string) *redlock.Script {
	t.Helper()
	for _, s := range redlock.Scripts() {
		if s.Name() == name {
			return s
		}
	}
	t.Fatalf("no script %q", name)
	return nil
}

func dial(t testing.TB, url string) *goredisnode.Node {
	t.Helper()
	n, err := goredisnode.Dial(url)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// step is one script call and the reply it must get; a want of nil means
// only that the call succeeds.
type step struct {
	script string
	key    string
	args   []string
	want   any
}

// run runs steps on n and fails t on the first unexpected reply.
func run(t *testing.T, n redlock.Node, steps []step) {
	t.Helper()
	ctx := ctxTimeout(t, 5*time.Second)
	for i, st := range steps {
		got, err := n.Eval(ctx, script(t, st.script), []string{st.key}, st.args)
		if err != nil {
			t.Fatalf("step %d: %s %q %q: %v", i, st.script, st.key, st.args, err)
		}
		if st.want != nil && !reflect.DeepEqual(got, st.want) {
			t.Fatalf("step %d: %s %q %q = %#v, want %#v", i, st.script, st.key, st.args, got, st.want)
		}
	}
}

var (
	granted = []any{int64(1), int64(0)}
	one     = int64(1)
	zero    = int64(0)
	minus1  = int64(-1)
)

// scriptSteps exercises every script in redlock.Scripts on key.
func scriptSteps(key string) []step {
	return []step{
		{"acquire", key, []string{"tok1", "60000"}, granted},
		{"acquire", key, []string{"tok1", "60000"}, granted}, // a retried acquire finds its grant
		{"extend", key, []string{"tok1", "120000"}, one},
		{"extend", key, []string{"tok2", "120000"}, minus1},
		{"release", key, []string{"tok2"}, minus1},
		{"release", key, []string{"tok1"}, one},
		{"release", key, []string{"tok1"}, zero},
		{"extend", key, []string{"tok1", "1000"}, zero},
		{"acquire", key, []string{"tok2", "60000"}, granted},
	}
}

func TestEvalScripts(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Config{})
	n := dial(t, srv.URL())
	run(t, n, scriptSteps("lock:a"))

	// Another token is refused with the remaining time to live.
	ctx := ctxTimeout(t, 5*time.Second)
	got, err := n.Eval(ctx, script(t, "acquire"), []string{"lock:a"}, []string{"tok3", "1000"})
	if err != nil {
		t.Fatal(err)
	}
	reply, ok := got.([]any)
	if !ok || len(reply) != 2 || reply[0] != int64(0) {
		t.Fatalf("acquire of a held key = %#v, want [0 pttl]", got)
	}
	if pttl, ok := reply[1].(int64); !ok || pttl <= 0 || pttl > 60000 {
		t.Fatalf("acquire of a held key: pttl %#v, want in (0, 60000]", reply[1])
	}
	if v := srv.MustDo(t, "GET", "lock:a"); v != "tok2" {
		t.Fatalf("GET lock:a = %#v, want tok2", v)
	}
}

func TestEvalConcurrent(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Config{})
	n := dial(t, srv.URL())
	acquire, release := script(t, "acquire"), script(t, "release")
	ctx := ctxTimeout(t, 10*time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := []string{"lock:" + strconv.Itoa(g%8)}
			tok := "tok" + strconv.Itoa(g)
			for range 20 {
				got, err := n.Eval(ctx, acquire, key, []string{tok, "60000"})
				if err != nil {
					errs <- err
					return
				}
				if reflect.DeepEqual(got, granted) {
					if got, err := n.Eval(ctx, release, key, []string{tok}); err != nil || got != one {
						errs <- fmt.Errorf("release of a granted lock = %#v, %v", got, err)
						return
					}
				} else if r, ok := got.([]any); !ok || len(r) != 2 || r[0] != zero {
					errs <- fmt.Errorf("acquire = %#v", got)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func BenchmarkEval(b *testing.B) {
	srv := redistest.Start(b, redistest.Config{})
	n, err := goredisnode.Dial(srv.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	extend := script(b, "extend")
	ctx := context.Background()
	keys, args := []string{"lock:bench"}, []string{"tok", "60000"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := n.Eval(ctx, extend, keys, args); err != nil {
			b.Fatal(err)
		}
	}
}

func commandCalls(t *testing.T, srv *redistest.Server, cmd string) int {
	t.Helper()
	info, _ := srv.MustDo(t, "INFO", "commandstats").(string)
	for _, line := range strings.Split(info, "\r\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls="); ok {
			n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			return n
		}
	}
	return 0
}

func TestEvalNoScriptFallback(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Config{})
	n := dial(t, srv.URL())
	for round := range 3 {
		srv.MustDo(t, "SCRIPT", "FLUSH")
		srv.MustDo(t, "CONFIG", "RESETSTAT")
		run(t, n, scriptSteps(fmt.Sprintf("lock:%d", round)))
		// Every call starts with EVALSHA; each script is sent with EVAL once,
		// when EVALSHA does not find it.
		if got, want := commandCalls(t, srv, "eval"), len(redlock.Scripts()); got != want {
			t.Errorf("round %d: %d EVAL calls, want %d", round, got, want)
		}
		if got, want := commandCalls(t, srv, "evalsha"), len(scriptSteps("")); got != want {
			t.Errorf("round %d: %d EVALSHA calls, want %d", round, got, want)
		}
	}
}

func TestEvalErrorReply(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Config{})
	n := dial(t, srv.URL())
	srv.MustDo(t, "HSET", "lock:hash", "f", "v")
	ctx := ctxTimeout(t, 5*time.Second)

	got, err := n.Eval(ctx, script(t, "acquire"), []string{"lock:hash"}, []string{"tok", "1000"})
	if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Errorf("acquire on a hash = %#v, %v; want a WRONGTYPE error", got, err)
	}
	got, err = n.Eval(ctx, script(t, "acquire"), []string{"lock:b"}, []string{"tok", "soon"})
	if err == nil || !strings.HasPrefix(err.Error(), "ERR ") || !strings.Contains(err.Error(), "not an integer") {
		t.Errorf("acquire with a bad ttl = %#v, %v; want an \"ERR ... not an integer\" error", got, err)
	}
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		t.Errorf("error %v (%T) is not a redis.Error", err, err)
	}
}

func TestEvalContext(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Config{})
	n := dial(t, srv.URL())
	run(t, n, []step{{"acquire", "lock:ctx", []string{"tok", "60000"}, granted}})

	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	defer srv.Resume()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	got, err := n.Eval(ctx, script(t, "release"), []string{"lock:ctx"}, []string{"tok"})
	if err == nil {
		t.Fatalf("Eval on a paused server = %#v, want an error", got)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Eval on a paused server took %v with a 200ms deadline", d)
	}

	// A context that is already done fails at once.
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if _, err := n.Eval(ctx, script(t, "release"), []string{"lock:ctx"}, []string{"tok"}); err == nil {
		t.Error("Eval with a cancelled context succeeded")
	}
}

func TestDialServerDown(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Config{})
	url := srv.URL()
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	n, err := goredisnode.Dial(url)
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
	if got, err := n.Eval(ctx, script(t, "acquire"), []string{"lock:down"}, []string{"tok", "1000"}); err == nil {
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
		got, err := n.Eval(ctx, script(t, "acquire"), []string{"lock:down"}, []string{"tok", "1000"})
		if err == nil {
			if !reflect.DeepEqual(got, granted) {
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

// TestDialServerPaused checks that Dial does not wait for a server that
// accepts connections but does not answer, and that Eval then gives up at
// its deadline while connecting.
func TestDialServerPaused(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Config{})
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	defer srv.Resume()
	start := time.Now()
	n := dial(t, srv.URL())
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("Dial took %v", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start = time.Now()
	if got, err := n.Eval(ctx, script(t, "acquire"), []string{"lock:paused"}, []string{"tok", "1000"}); err == nil {
		t.Fatalf("Eval on a paused server = %#v, want an error", got)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Eval on a paused server took %v with a 300ms deadline", d)
	}
}

const (
	aclUser = "locker"
	aclPass = "hunter2secret"
)

// addUser creates an ACL user on srv that may run the lock scripts.
func addUser(t *testing.T, srv *redistest.Server) {
	t.Helper()
	srv.MustDo(t, "ACL", "SETUSER", aclUser, "on", ">"+aclPass, "~*", "+@all")
}

// checkName fails t if name is not want or contains a credential.
func checkName(t *testing.T, name, want string) {
	t.Helper()
	if name != want {
		t.Errorf("Name() = %q, want %q", name, want)
	}
	if strings.Contains(name, aclPass) || strings.Contains(name, aclUser) {
		t.Errorf("Name() = %q contains a credential", name)
	}
}

// inDB reports whether key exists in database db of the server at addr,
// asking with a client of its own.
func inDB(t *testing.T, srv *redistest.Server, db int, key string) bool {
	t.Helper()
	c := redis.NewClient(&redis.Options{Network: srv.Network(), Addr: srv.Addr(), DB: db})
	defer c.Close()
	n, err := c.Exists(ctxTimeout(t, 5*time.Second), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

func TestDialURLs(t *testing.T) {
	t.Parallel()
	tcp := redistest.Start(t, redistest.Config{})
	unix := redistest.Start(t, redistest.Config{Unix: true})
	addUser(t, tcp)
	addUser(t, unix)
	hostPort := strings.TrimPrefix(tcp.URL(), "redis://")
	sock := strings.TrimPrefix(unix.URL(), "unix://")
	creds := aclUser + ":" + aclPass + "@"

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
			n := dial(t, tt.url)
			checkName(t, n.Name(), tt.want)
			key := "lock:url:" + tt.name
			run(t, n, []step{{"acquire", key, []string{"tok", "60000"}, granted}})
			if !inDB(t, tt.srv, tt.db, key) {
				t.Errorf("key is not in database %d", tt.db)
			}
			if tt.db != 0 && inDB(t, tt.srv, 0, key) {
				t.Errorf("key is in database 0, want only %d", tt.db)
			}
		})
	}
}

func TestDialWrongPassword(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Config{Unix: true})
	addUser(t, srv)
	const wrong = "wrongpassword123"
	for _, url := range []string{
		"unix://" + aclUser + ":" + wrong + "@" + strings.TrimPrefix(srv.URL(), "unix://"),
		"unix://nosuchuser:" + wrong + "@" + strings.TrimPrefix(srv.URL(), "unix://"),
	} {
		n := dial(t, url)
		if strings.Contains(n.Name(), wrong) {
			t.Errorf("Name() = %q contains the password", n.Name())
		}
		ctx := ctxTimeout(t, 5*time.Second)
		got, err := n.Eval(ctx, script(t, "acquire"), []string{"lock:pw"}, []string{"tok", "1000"})
		if err == nil {
			t.Fatalf("Eval with a wrong password = %#v, want an error", got)
		}
		if strings.Contains(err.Error(), wrong) {
			t.Errorf("error %q contains the password", err)
		}
		if !strings.Contains(err.Error(), "WRONGPASS") {
			t.Errorf("error %q, want WRONGPASS", err)
		}
	}
}

// TestDialPasswordOnly covers redis://:password@host, which authenticates
// as the default user.
func TestDialPasswordOnly(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Config{})
	hostPort := strings.TrimPrefix(srv.URL(), "redis://")
	srv.MustDo(t, "CONFIG", "SET", "requirepass", aclPass) // srv.Do stops working here
	n := dial(t, "redis://:"+aclPass+"@"+hostPort+"/1")
	checkName(t, n.Name(), hostPort+"/1")
	run(t, n, []step{{"acquire", "lock:pw", []string{"tok", "60000"}, granted}})

	n = dial(t, "redis://"+hostPort+"/1")
	if _, err := n.Eval(ctxTimeout(t, 5*time.Second), script(t, "acquire"), []string{"lock:pw"}, []string{"tok", "60000"}); err == nil {
		t.Error("Eval without the password succeeded")
	}
}

func TestDialBadURL(t *testing.T) {
	t.Parallel()
	const pw = "hunter2secret"
	for _, url := range []string{
		"",
		"localhost:6379",
		"127.0.0.1:6379",
		"http://u:" + pw + "@h:6379",
		"redis://u:" + pw + "@h:6379/x",
		"redis://u:" + pw + "@h:6379/1/2",
		"redis://u:" + pw + "@h:port",
		"redis://u:" + pw + "@h:6379/0?bogus=1",
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
	} {
		n, err := goredisnode.Dial(url)
		if err == nil {
			n.Close()
			t.Errorf("Dial(%q) succeeded", url)
			continue
		}
		msg := err.Error()
		if strings.Contains(msg, "hunter") || strings.Contains(msg, "secret") {
			t.Errorf("Dial(%q) error %q reveals the password", url, msg)
		}
		if !strings.HasPrefix(msg, "goredisnode: invalid URL") {
			t.Errorf("Dial(%q) error %q", url, msg)
		}
		t.Logf("%q: %v", url, err)
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Config{Unix: true})
	c := redis.NewClient(&redis.Options{
		Network: "unix", Addr: srv.Addr(), DB: 2,
		Username: "default", Password: "",
		MaxRetries: -1, ContextTimeoutEnabled: true,
	})
	defer c.Close()

	n := goredisnode.New(c, "")
	checkName(t, n.Name(), srv.Addr()+"/2")
	run(t, n, scriptSteps("lock:new"))
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	// The caller's client is still open.
	if err := c.Ping(ctxTimeout(t, 5*time.Second)).Err(); err != nil {
		t.Fatalf("client closed by Node.Close: %v", err)
	}
	if n := goredisnode.New(c, "primary"); n.Name() != "primary" {
		t.Errorf("Name() = %q, want primary", n.Name())
	}

	var u redis.UniversalClient = redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{"127.0.0.1:1"}, DB: 1})
	defer u.Close()
	if n := goredisnode.New(u, ""); n.Name() != "127.0.0.1:1/1" {
		t.Errorf("Name() of a universal client = %q", n.Name())
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"10.0.0.2:7000", "10.0.0.1:7000"}, Password: aclPass})
	defer cc.Close()
	checkName(t, goredisnode.New(cc, "").Name(), "10.0.0.1:7000,10.0.0.2:7000")
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"b": "10.0.0.2:6379", "a": "10.0.0.1:6379"}, Password: aclPass})
	defer ring.Close()
	checkName(t, goredisnode.New(ring, "").Name(), "10.0.0.1:6379,10.0.0.2:6379")

	other := &otherScripter{Scripter: c, secret: aclPass}
	name := goredisnode.New(other, "").Name()
	if !strings.HasPrefix(name, "*goredisnode_test.otherScripter@0x") || strings.Contains(name, aclPass) {
		t.Errorf("Name() of another Scripter = %q", name)
	}
	if again := goredisnode.New(other, "").Name(); again != name {
		t.Errorf("Name() of the same client changed from %q to %q", name, again)
	}
}

type otherScripter struct {
	redis.Scripter
	secret string
}
