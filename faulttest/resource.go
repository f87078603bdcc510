package faulttest

import "sync"

// A Resource is a fenced resource, as a lock's owner would write to it: it
// accepts a write only if the writer's fence is at least the greatest fence
// it has accepted, so that an owner who lost the lock without noticing is
// turned away once a newer owner has written. Every write is recorded in
// the history.
type Resource struct {
	h   *History
	mu  sync.Mutex
	top int64
}

// NewResource returns an empty resource that records into h.
func NewResource(h *History) *Resource { return &Resource{h: h} }

// Write writes on behalf of the holder of hl and reports whether the
// resource accepted the write.
func (r *Resource) Write(hl *Held) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	ok := hl.Op.Fence >= r.top
	if ok {
		r.top = hl.Op.Fence
	}
	r.h.AddWrite(Write{At: r.h.Now(), Op: hl.Op.ID, Fence: hl.Op.Fence, Accepted: ok})
	return ok
}
