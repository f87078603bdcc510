package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, for PostgreSQL
	_ "modernc.org/sqlite"             // the "sqlite" driver, in pure Go
)

// A store is the inventory database: one row per item, with its stock
// and the greatest fence of a write the row has accepted.
//
// Every statement uses $1-style placeholders, which both PostgreSQL and
// SQLite understand.
type store struct {
	db   *sql.DB
	name string // what the database is, for the output
}

// schema creates the items table. fence only ever grows: it is the
// fencing token of the last write, and a write is accepted only with a
// greater one.
const schema = `CREATE TABLE IF NOT EXISTS items (
	sku   TEXT PRIMARY KEY,
	stock INTEGER NOT NULL CHECK (stock >= 0),
	fence BIGINT NOT NULL
)`

// openStore opens the database named by dsn and creates the schema if
// needed. A dsn that starts with postgres:// or postgresql:// names a
// PostgreSQL database; any other names an SQLite database (a file name,
// or a file: URI), and the empty dsn an SQLite database in memory.
func openStore(ctx context.Context, dsn string) (*store, error) {
	var s store
	var err error
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		s.name = "PostgreSQL"
		s.db, err = sql.Open("pgx", dsn)
	case dsn == "":
		s.name = "SQLite, in memory"
		s.db, err = sql.Open("sqlite", ":memory:")
	default:
		s.name = "SQLite, " + dsn
		s.db, err = sql.Open("sqlite", dsn)
	}
	if err != nil {
		return nil, fmt.Errorf("opening the database (%s): %w", s.name, err)
	}
	if strings.HasPrefix(s.name, "SQLite") {
		// SQLite runs one write at a time anyway. One connection, kept
		// open, also keeps an in-memory database alive: each
		// connection to ":memory:" would have a database of its own.
		s.db.SetMaxOpenConns(1)
		s.db.SetMaxIdleConns(1)
		s.db.SetConnMaxLifetime(0)
		s.db.SetConnMaxIdleTime(0)
	}
	if _, err := s.db.ExecContext(ctx, schema); err != nil {
		return nil, errors.Join(fmt.Errorf("creating the schema (%s): %w", s.name, err), s.db.Close())
	}
	return &s, nil
}

// close closes the database.
func (s *store) close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("closing the database (%s): %w", s.name, err)
	}
	return nil
}

// restock sets the stock of sku, adding the item if it is new. It leaves
// the fence of an existing item as it is: fences must never go back.
func (s *store) restock(ctx context.Context, sku string, stock int) error {
	_, err := s.db.ExecContext(ctx,
		`INSERT INTO items (sku, stock, fence) VALUES ($1, $2, 0)
		ON CONFLICT (sku) DO UPDATE SET stock = excluded.stock`,
		sku, stock)
	if err != nil {
		return fmt.Errorf("restocking %q: %w", sku, err)
	}
	return nil
}

// item returns the stock of sku and the greatest fence it has accepted.
func (s *store) item(ctx context.Context, sku string) (stock int, fence int64, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT stock, fence FROM items WHERE sku = $1`, sku).Scan(&stock, &fence)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, fmt.Errorf("reading %q: no such item", sku)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("reading %q: %w", sku, err)
	}
	return stock, fence, nil
}

// sell takes qty of sku out of stock, as the owner of the lock whose
// fencing token is fence. The database checks the fence in the same
// statement as the write: the write is applied only if fence is greater
// than that of every write the row has accepted, and only if enough is in
// stock. sell reports whether it was applied; when it was not, the row is
// unchanged, and why explains the refusal.
//
// Each holder of the lock writes once, so the fence must be strictly
// greater; a holder that wrote several times under one lock would need
// fence <= $2 instead. No check made before the statement could do the
// same: the lock could be lost between the check and the write.
func (s *store) sell(ctx context.Context, sku string, qty int, fence int64) (applied bool, err error) {
	res, err := s.db.ExecContext(ctx,
		`UPDATE items SET stock = stock - $1, fence = $2
		WHERE sku = $3 AND fence < $2 AND stock >= $1`,
		qty, fence, sku)
	if err != nil {
		return false, fmt.Errorf("selling %d of %q with fence %d: %w", qty, sku, fence, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("selling %d of %q with fence %d: counting the rows written: %w", qty, sku, fence, err)
	}
	switch n {
	case 0:
		return false, nil
	case 1:
		return true, nil
	default:
		return false, fmt.Errorf("selling %d of %q with fence %d wrote %d rows, want 1", qty, sku, fence, n)
	}
}

// why explains why a sale of qty of sku with fence was refused, from the
// row as it is now.
func (s *store) why(ctx context.Context, sku string, qty int, fence int64) string {
	stock, accepted, err := s.item(ctx, sku)
	switch {
	case err != nil:
		return err.Error()
	case accepted >= fence:
		return fmt.Sprintf("fence %d is not greater than %d, the fence of a write the database has already accepted", fence, accepted)
	case stock < qty:
		return fmt.Sprintf("only %d in stock", stock)
	default:
		return "the row has changed since" // the fence or the stock, by a write after this one
	}
}
