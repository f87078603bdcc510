package wire

import (
	"embed"
	"strconv"
	"strings"

	"github.com/quorumlock/redlock/driver"
)

// The scripts are assembled from the pieces in lua/: a script is the
// pieces it needs, one after another. The constants that the Lua shares
// with Go are written in the pieces as ${NAME}, and each piece is read
// with them replaced by their values in Go, where alone they are written
// (TestLuaWritesNoConstant checks that the pieces do not write one out).
//
//go:embed lua/*.lua
var luaFiles embed.FS

// luaConstants replaces the constants' names in a piece with their Lua
// literals.
var luaConstants = strings.NewReplacer(
	"${RELEASED}", luaString(releasedPrefix),
	"${LEADER}", luaString(leaderPrefix),
	"${MARKER}", luaString(markerPrefix),
	"${LEGACY}", luaString(legacyPrefix),
	"${READERS}", luaString(readersHeld),
	"${FORMAT}", luaString(strconv.Itoa(Format)),
	"${LONG_GRANT}", strconv.FormatInt(LongGrant.Milliseconds(), 10),
)

// luaString returns s as a Lua string literal; s holds no quote and no
// backslash.
func luaString(s string) string { return "'" + s + "'" }

// piece returns lua/name.lua with the constants' values in place of their
// names. It panics if the file is missing or names a constant that
// luaConstants does not have: the package's tests fail at once.
func piece(name string) string {
	b, err := luaFiles.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic(err)
	}
	src := luaConstants.Replace(string(b))
	if i := strings.Index(src, "${"); i >= 0 {
		panic("wire: lua/" + name + ".lua names an unknown constant at " + src[i:min(i+20, len(src))])
	}
	return src
}

var (
	horizonSrc       = piece("horizon")
	markerSrc        = piece("node")
	counterSrc       = piece("counter")
	announceSrc      = piece("announce")
	acquireOneSrc    = piece("acquire_one")
	acquireSrc       = piece("acquire")
	releaseSrc       = piece("release")
	extendSrc        = piece("extend")
	probeSrc         = piece("probe")
	holderSrc        = piece("holder")
	inspectSrc       = piece("inspect")
	forceSrc         = piece("force")
	acquirePermitSrc = piece("acquire_permit")
	releasePermitSrc = piece("release_permit")
	electSrc         = piece("elect")
	leaderSrc        = piece("leader")
	rwAdmitSrc       = piece("rw_admit")
	rwReadSrc        = piece("rw_read")
	rwWriteSrc       = piece("rw_write")
	rwReleaseSrc     = piece("rw_release")
	rwExtendSrc      = piece("rw_extend")
	rwDropSrc        = piece("rw_drop")
	adoptSrc         = piece("adopt")

	// nodeSrc is what the scripts that read or write the node marker
	// start with; an extension needs only its horizon.
	nodeSrc = horizonSrc + markerSrc

	// The scripts of a lock, on one key or on several keys at once.
	acquireScript = driver.NewScript("acquire", acquireOneSrc+nodeSrc+acquireSrc)
	releaseScript = driver.NewScript("release", counterSrc+announceSrc+releaseSrc)
	extendScript  = driver.NewScript("extend", horizonSrc+extendSrc)
	probeScript   = driver.NewScript("probe", nodeSrc+probeSrc)
	// inspect writes nothing, which its flags tell Redis, so that it runs
	// on replicas and on a node out of memory too.
	inspectScript = driver.NewScript("inspect", "#!lua flags=no-writes\n"+holderSrc+inspectSrc)
	forceScript   = driver.NewScript("force", holderSrc+announceSrc+forceSrc)

	// The scripts of a semaphore; a permit is extended as a lock on its
	// slot's key.
	acquirePermitScript = driver.NewScript("acquire_permit", nodeSrc+acquirePermitSrc)
	releasePermitScript = driver.NewScript("release_permit", counterSrc+announceSrc+releasePermitSrc)

	// The scripts of an election, besides the lock's.
	electScript  = driver.NewScript("elect", holderSrc+electSrc)
	leaderScript = driver.NewScript("leader", "#!lua flags=no-writes\n"+holderSrc+leaderSrc)

	// The scripts of a read-write lock besides the lock's, which extend
	// and release its writer; and Adopt's, which writes only the fence
	// counter.
	rwReadScript    = driver.NewScript("rw_read", nodeSrc+rwAdmitSrc+rwReadSrc)
	rwWriteScript   = driver.NewScript("rw_write", nodeSrc+rwAdmitSrc+rwWriteSrc)
	rwReleaseScript = driver.NewScript("rw_release", counterSrc+announceSrc+rwReleaseSrc)
	rwExtendScript  = driver.NewScript("rw_extend", nodeSrc+rwExtendSrc)
	rwDropScript    = driver.NewScript("rw_drop", announceSrc+rwDropSrc)
	adoptScript     = driver.NewScript("adopt", adoptSrc)
)

// Scripts returns every script the client may run, so that a node can
// load them ahead of time (SCRIPT LOAD), and a test can run them alone.
func Scripts() []*driver.Script {
	return []*driver.Script{acquireScript, releaseScript, extendScript, probeScript, inspectScript, forceScript,
		acquirePermitScript, releasePermitScript,
		electScript, leaderScript,
		rwReadScript, rwWriteScript, rwReleaseScript, rwExtendScript, rwDropScript, adoptScript}
}
