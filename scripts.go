package redlock

import (
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
)

// A Script is one of the Lua scripts the client runs on its nodes. Node
// implementations use SHA1 for EVALSHA and Source for the EVAL fallback.
// Scripts are created by this package only and are immutable.
type Script struct {
	name string
	src  string
	sha  string
}

func newScript(name string, src ...string) *Script {
	var all string
	for _, s := range src {
		all += s
	}
	sum := sha1.Sum([]byte(all))
	return &Script{name: name, src: all, sha: hex.EncodeToString(sum[:])}
}

// Name returns a short name for the script, such as "acquire".
func (s *Script) Name() string { return s.name }

// Source returns the Lua source, for EVAL and SCRIPT LOAD.
func (s *Script) Source() string { return s.src }

// SHA1 returns the hex SHA-1 digest of the source, for EVALSHA.
func (s *Script) SHA1() string { return s.sha }

var (
	//go:embed lua/node.lua
	nodeSrc string
	//go:embed lua/acquire.lua
	acquireSrc string
	//go:embed lua/release.lua
	releaseSrc string
	//go:embed lua/extend.lua
	extendSrc string
	//go:embed lua/probe.lua
	probeSrc string

	acquireScript = newScript("acquire", nodeSrc, acquireSrc)
	releaseScript = newScript("release", releaseSrc)
	extendScript  = newScript("extend", extendSrc)
	probeScript   = newScript("probe", nodeSrc, probeSrc)
)

// Scripts returns every script the client may run, so that a Node can load
// them ahead of time (SCRIPT LOAD) if it wishes.
func Scripts() []*Script {
	return []*Script{acquireScript, releaseScript, extendScript, probeScript}
}

// The keys the client writes besides the lock keys themselves.
const (
	// markerKey is the hash in which each node records when its process
	// started and the largest TTL used on it (lua/node.lua).
	markerKey = "redlock:node"
	// fencePrefix starts the name of each lock's fence counter.
	fencePrefix = "redlock:fence:"
)
