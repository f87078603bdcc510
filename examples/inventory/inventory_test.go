package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/redistest"
)

// startNodes starts three fresh redis-server processes for t and returns
// their URLs.
func startNodes(t *testing.T) []string {
	t.Helper()
	return redistest.URLs(redistest.StartN(t, 3, redistest.Config{}))
}

// testConfig is the program's configuration for tests, on the database
// dsn. Nobody has locked anything on the test's servers before, which
// have just started, so restart quarantine can be disabled, and the first
// lock need not wait one TTL. The program itself keeps it on.
func testConfig(dsn string) config {
	return config{
		dsn:     dsn,
		sku:     "widget",
		stock:   100,
		workers: 4,
		orders:  5,
		qty:     3,
		work:    10 * time.Millisecond,
		ttl:     time.Second,
		opts:    &redlock.Options{DisableQuarantine: true},
	}
}

// checkRun runs the program with cfg and checks what it reports against
// the database, which it reads itself afterwards if cfg.dsn names one
// that outlives the program.
func checkRun(t *testing.T, cfg config) {
	t.Helper()
	urls := startNodes(t)
	var out bytes.Buffer
	rep, err := run(context.Background(), urls, &out, cfg)
	t.Logf("output:\n%s", &out)
	if err != nil {
		t.Fatalf("run: %v", err)
	}

	// Every order sold, each one after another.
	if n, want := len(rep.sales), cfg.workers*cfg.orders; n != want {
		t.Errorf("%d sales, want %d (%d workers, %d orders each)", n, want, cfg.workers, cfg.orders)
	}
	if want := cfg.workers * cfg.orders * cfg.qty; rep.sold != want {
		t.Errorf("sold %d, want %d", rep.sold, want)
	}
	if err := checkChain(cfg.stock, rep.sales); err != nil {
		t.Error(err)
	}
	for i := 1; i < len(rep.sales); i++ {
		if rep.sales[i].fence <= rep.sales[i-1].fence {
			t.Errorf("sales %d and %d have fences %d and %d, want increasing", i, i+1, rep.sales[i-1].fence, rep.sales[i].fence)
		}
	}

	// The stale write was refused, and changed nothing.
	s := rep.stale
	if s.applied {
		t.Errorf("the database applied the stale write of fence %d after fence %d", s.staleFence, s.newerFence)
	}
	if s.after != s.before {
		t.Errorf("the refused stale write changed the stock from %d to %d", s.before, s.after)
	}
	if len(rep.sales) > 0 && s.staleFence <= rep.sales[len(rep.sales)-1].fence {
		t.Errorf("the stale holder's fence %d is not greater than the last worker's, %d", s.staleFence, rep.sales[len(rep.sales)-1].fence)
	}
	if s.newerFence <= s.staleFence {
		t.Errorf("holder B's fence %d is not greater than holder A's, %d", s.newerFence, s.staleFence)
	}
	for _, want := range []string{"REJECTED by the database, 0 rows affected", "is not greater than"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}

	want := cfg.stock - cfg.workers*cfg.orders*cfg.qty - cfg.qty
	if rep.final != want {
		t.Errorf("final stock %d, want %d", rep.final, want)
	}
	if cfg.dsn == "" {
		return // in memory: gone with the program
	}
	// What the database holds, read afresh.
	st, err := openStore(context.Background(), cfg.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := st.close(); err != nil {
			t.Error(err)
		}
	}()
	stock, fence, err := st.item(context.Background(), cfg.sku)
	if err != nil {
		t.Fatal(err)
	}
	if stock != want {
		t.Errorf("the database holds a stock of %d, want %d", stock, want)
	}
	if fence != s.newerFence {
		t.Errorf("the database holds fence %d, want holder B's, %d, the last it accepted", fence, s.newerFence)
	}
}

func TestRunSQLiteFile(t *testing.T) {
	checkRun(t, testConfig(filepath.Join(t.TempDir(), "inventory.db")))
}

func TestRunSQLiteMemory(t *testing.T) {
	checkRun(t, testConfig(""))
}

func TestRunBadConfig(t *testing.T) {
	cfg := testConfig("")
	cfg.stock = cfg.workers*cfg.orders*cfg.qty + cfg.qty - 1
	if _, err := run(context.Background(), nil, &bytes.Buffer{}, cfg); err == nil || !strings.Contains(err.Error(), "too small") {
		t.Errorf("run with a stock of %d: %v, want an error saying it is too small", cfg.stock, err)
	}
	cfg = testConfig("")
	cfg.workers = 0
	if _, err := run(context.Background(), nil, &bytes.Buffer{}, cfg); err == nil {
		t.Error("run with no workers succeeded")
	}
}

func TestCheckChain(t *testing.T) {
	good := []sale{{fence: 1, before: 10, after: 7}, {fence: 2, before: 7, after: 4}}
	if err := checkChain(10, good); err != nil {
		t.Errorf("checkChain(%v): %v", good, err)
	}
	// Two workers read 10: they overlapped.
	bad := []sale{{fence: 1, before: 10, after: 7}, {fence: 2, before: 10, after: 7}}
	if err := checkChain(10, bad); err == nil {
		t.Errorf("checkChain(%v) found nothing wrong", bad)
	}
}

// testStore checks the fenced write on the database dsn: only a greater
// fence writes, and only with enough in stock.
func testStore(t *testing.T, dsn string) {
	ctx := context.Background()
	st, err := openStore(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := st.close(); err != nil {
			t.Error(err)
		}
	}()
	const sku = "gadget"
	if err := st.restock(ctx, sku, 10); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		qty     int
		fence   int64
		applied bool
		stock   int
		why     string
	}{
		{3, 100, true, 7, ""},
		{3, 100, false, 7, "not greater than 100"},  // the same fence again
		{3, 99, false, 7, "not greater than 100"},   // a stale fence
		{8, 200, false, 7, "only 7 in stock"},       // too few
		{3, 101, true, 4, ""},                       // the next owner
		{3, -1 << 63, false, 4, "not greater than"}, // the least fence there is
	}
	for _, s := range steps {
		applied, err := st.sell(ctx, sku, s.qty, s.fence)
		if err != nil {
			t.Fatal(err)
		}
		stock, _, err := st.item(ctx, sku)
		if err != nil {
			t.Fatal(err)
		}
		if applied != s.applied || stock != s.stock {
			t.Errorf("sell(%d, fence %d) = %t, leaving %d; want %t, leaving %d", s.qty, s.fence, applied, stock, s.applied, s.stock)
		}
		if why := st.why(ctx, sku, s.qty, s.fence); !applied && !strings.Contains(why, s.why) {
			t.Errorf("sell(%d, fence %d) refused because %q, want it to say %q", s.qty, s.fence, why, s.why)
		}
	}

	// Restocking keeps the fence: an old owner still cannot write.
	if err := st.restock(ctx, sku, 50); err != nil {
		t.Fatal(err)
	}
	if applied, err := st.sell(ctx, sku, 1, 101); err != nil || applied {
		t.Errorf("sell with fence 101 after a restock = %t, %v; want false, nil", applied, err)
	}
	stock, fence, err := st.item(ctx, sku)
	if err != nil || stock != 50 || fence != 101 {
		t.Errorf("after the restock: stock %d, fence %d, %v; want 50, 101, nil", stock, fence, err)
	}
	if _, _, err := st.item(ctx, "no such sku"); err == nil || !strings.Contains(err.Error(), "no such item") {
		t.Errorf("item of an unknown sku: %v, want an error saying there is no such item", err)
	}
}

func TestStoreSQLite(t *testing.T) { testStore(t, filepath.Join(t.TempDir(), "store.db")) }
