package history

import (
	"reflect"
	"testing"
)

// The checker's rules for read-write locks and adoptions, on synthetic
// histories as in checker_test.go.

// reader returns a reader's hold of key "k" (see holder).
func reader(id int, client, token string, ret, until int, fence int64) *Op {
	op := holder(id, client, token, ret, until, fence)
	op.Kind = OpRead
	return op
}

// writer returns a writer's hold of key "k" (see holder).
func writer(id int, client, token string, ret, until int, fence int64) *Op {
	op := holder(id, client, token, ret, until, fence)
	op.Kind = OpWrite
	return op
}

// released sets op's Release, called at call.
func released(op *Op, call int) *Op {
	op.Release = &Release{Call: ms(call), Return: ms(call + 1)}
	return op
}

// adoption returns client's adoption of from's hold, returned at ret and
// claimed until until, with fence; from handed over at ret-2.
func adoption(id int, client string, from *Op, ret, until int, fence int64) *Op {
	from.Handover = ms(ret - 2)
	return &Op{ID: id, Client: client, Kind: from.Kind, Key: from.Key, TTLms: from.TTLms, Adopts: from.ID,
		Start: ms(ret - 1), Return: ms(ret), OK: true, Token: from.Token, Fence: fence, RoundStart: ms(ret - 1), Until: ms(until)}
}

// waiting returns a writer's call of key "k" that started at start and
// returned at ret, obtaining the lock if ok, with the allowance bound for
// a round (Op.WaitBoundMs).
func waiting(id int, client string, start, ret int, ok bool, bound int64) *Op {
	op := writer(id, client, "tw", ret, ret+100, 99)
	op.Start, op.WaitBoundMs = ms(start), bound
	if !ok {
		op.OK, op.Token, op.Fence, op.Until, op.Reason = false, "", 0, 0, "context"
	}
	return op
}

func TestCheckerRW(t *testing.T) {
	cases := []struct {
		name string
		h    *History
		want map[Kind]int
	}{
		{"readers overlap, sharing a fence", history(3,
			reader(1, "a", "t1", 10, 100, 5),
			reader(2, "b", "t2", 20, 110, 5),
			reader(3, "c", "t3", 50, 150, 6),
		), nil},
		{"a writer once the readers ended, a reader after it", history(3,
			reader(1, "a", "t1", 10, 100, 5),
			released(reader(2, "b", "t2", 20, 120, 5), 90),
			released(writer(3, "c", "t3", 100, 200, 6), 150),
			reader(4, "a", "t4", 151, 250, 6),
		), nil},
		{"a writer overlapping a reader", history(3,
			reader(1, "a", "t1", 10, 100, 5),
			writer(2, "b", "t2", 50, 150, 6),
		), map[Kind]int{Overlap: 1}},
		{"a reader overlapping a writer", history(3,
			writer(1, "a", "t1", 10, 100, 5),
			reader(2, "b", "t2", 50, 150, 6),
		), map[Kind]int{Overlap: 1}},
		{"a writer overlapping two readers", history(3,
			reader(1, "a", "t1", 10, 100, 5),
			reader(2, "b", "t2", 20, 100, 5),
			writer(3, "c", "t3", 50, 150, 6),
		), map[Kind]int{Overlap: 2}},
		{"a writer overlapping a lock on its key", history(3,
			holder(1, "a", "t1", 10, 100, 5),
			writer(2, "b", "t2", 50, 150, 6),
		), map[Kind]int{Overlap: 1}},
		{"a writer's fence not above an earlier reader's", history(3,
			released(reader(1, "a", "t1", 10, 100, 9), 40),
			writer(2, "b", "t2", 50, 150, 8),
		), map[Kind]int{Fence: 1}},
		{"a writer's fence equal to an earlier reader's", history(3,
			released(reader(1, "a", "t1", 10, 100, 9), 40),
			writer(2, "b", "t2", 50, 150, 9),
		), map[Kind]int{Fence: 1}},
		{"a reader's fence below the last writer's", history(3,
			released(writer(1, "a", "t1", 10, 100, 9), 40),
			reader(2, "b", "t2", 50, 150, 8),
		), map[Kind]int{Fence: 1}},

		// Adoptions.
		{"an adoption continues the hold and ends it", func() *History {
			w := writer(1, "a", "t1", 10, 100, 5)
			a := adoption(2, "b", w, 40, 140, 6)
			a.Extends = []Extend{{Start: ms(60), Return: ms(61), OK: true, Until: ms(160)}}
			a = released(a, 120)
			return history(3, w, a, writer(3, "c", "t3", 121, 200, 7))
		}(), nil},
		{"an adopted reader beside other readers", func() *History {
			r := reader(1, "a", "t1", 10, 100, 5)
			return history(3, r, reader(2, "c", "t2", 20, 100, 5), adoption(3, "b", r, 40, 90, 5))
		}(), nil},
		{"without the handover the holder's claim would overlap", func() *History {
			w := writer(1, "a", "t1", 10, 100, 5)
			a := released(adoption(2, "b", w, 40, 140, 6), 60)
			w.Handover = 0
			return history(3, w, a, writer(3, "c", "t3", 61, 200, 7))
		}(), map[Kind]int{Overlap: 1}},
		{"an adoption's fence below the adopted hold's", func() *History {
			w := writer(1, "a", "t1", 10, 100, 5)
			return history(3, w, adoption(2, "b", w, 40, 100, 4))
		}(), map[Kind]int{Fence: 1}},
		{"a writer not above an adoption's fence", func() *History {
			w := writer(1, "a", "t1", 10, 100, 5)
			a := released(adoption(2, "b", w, 40, 100, 8), 60)
			return history(3, w, a, writer(3, "c", "t3", 61, 200, 7))
		}(), map[Kind]int{Fence: 1}},
		{"an adopted writer overlapping another writer", func() *History {
			w := writer(1, "a", "t1", 10, 100, 5)
			return history(3, w, adoption(2, "b", w, 40, 140, 6), writer(3, "c", "t3", 120, 200, 7))
		}(), map[Kind]int{Overlap: 1}},

		// A writer's wait.
		{"a writer in within a round of the readers before it", history(3,
			released(reader(1, "a", "t1", 5, 100, 5), 60),
			reader(2, "b", "t2", 8, 90, 5),
			waiting(3, "w", 10, 150, true, 50),
		), nil},
		{"a writer that gave up within the bound", history(3,
			reader(1, "a", "t1", 5, 100, 5),
			waiting(2, "w", 10, 150, false, 50),
		), nil},
		{"a writer kept out by readers that came after it", history(3,
			released(reader(1, "a", "t1", 5, 100, 5), 60),
			reader(2, "b", "t2", 100, 200, 5),
			reader(3, "c", "t3", 150, 300, 5),
			waiting(4, "w", 10, 400, false, 50),
		), map[Kind]int{Starved: 1}},
		{"a writer that got in past the bound", history(3,
			released(reader(1, "a", "t1", 5, 100, 5), 60),
			waiting(2, "w", 10, 200, true, 50),
		), map[Kind]int{Starved: 1}},
		{"a writer without a recorded bound is not judged", history(3,
			reader(1, "b", "t1", 100, 200, 5),
			waiting(2, "w", 10, 400, false, 0),
		), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			vs := Check(c.h)
			got := Count(vs)
			if c.want == nil {
				c.want = map[Kind]int{}
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("found %v, want %v:\n%v", got, c.want, vs)
			}
			for _, v := range vs {
				if v.Detail == "" || v.Key == "" || len(v.Ops) == 0 {
					t.Errorf("violation without detail, key or ops: %+v", v)
				}
			}
		})
	}
}

func TestReaderOverlaps(t *testing.T) {
	h := history(3,
		reader(1, "a", "t1", 10, 100, 5),
		reader(2, "b", "t2", 20, 110, 5),
		reader(3, "c", "t3", 50, 150, 6),
		released(writer(4, "d", "t4", 200, 300, 7), 250),
		reader(5, "a", "t5", 251, 300, 7),
	)
	if n := ReaderOverlaps(h); n != 3 {
		t.Errorf("ReaderOverlaps = %d, want 3 (1-2, 1-3, 2-3)", n)
	}
}
