package wire

import (
	_ "embed"

	"github.com/quorumlock/redlock/driver"
)

var (
	//go:embed lua/horizon.lua
	horizonSrc string
	//go:embed lua/node.lua
	markerSrc string
	//go:embed lua/counter.lua
	counterSrc string
	//go:embed lua/acquire_one.lua
	acquireOneSrc string
	//go:embed lua/acquire.lua
	acquireSrc string
	//go:embed lua/release.lua
	releaseSrc string
	//go:embed lua/extend.lua
	extendSrc string
	//go:embed lua/probe.lua
	probeSrc string
	//go:embed lua/holder.lua
	holderSrc string
	//go:embed lua/inspect.lua
	inspectSrc string
	//go:embed lua/force.lua
	forceSrc string
	//go:embed lua/acquire_permit.lua
	acquirePermitSrc string
	//go:embed lua/release_permit.lua
	releasePermitSrc string
	//go:embed lua/elect.lua
	electSrc string
	//go:embed lua/leader.lua
	leaderSrc string
	//go:embed lua/rw_admit.lua
	rwAdmitSrc string
	//go:embed lua/rw_read.lua
	rwReadSrc string
	//go:embed lua/rw_write.lua
	rwWriteSrc string
	//go:embed lua/rw_release.lua
	rwReleaseSrc string
	//go:embed lua/rw_extend.lua
	rwExtendSrc string
	//go:embed lua/rw_drop.lua
	rwDropSrc string
	//go:embed lua/adopt.lua
	adoptSrc string

	// nodeSrc is what the scripts that read or write the node marker
	// start with; an extension needs only its horizon.
	nodeSrc = horizonSrc + markerSrc

	// The scripts of a lock, on one key or on several keys at once.
	acquireScript = driver.NewScript("acquire", acquireOneSrc+nodeSrc+acquireSrc)
	releaseScript = driver.NewScript("release", counterSrc+releaseSrc)
	extendScript  = driver.NewScript("extend", horizonSrc+extendSrc)
	probeScript   = driver.NewScript("probe", nodeSrc+probeSrc)
	// inspect writes nothing, which its flags tell Redis, so that it runs
	// on replicas and on a node out of memory too.
	inspectScript = driver.NewScript("inspect", "#!lua flags=no-writes\n"+holderSrc+inspectSrc)
	forceScript   = driver.NewScript("force", holderSrc+forceSrc)

	// The scripts of a semaphore; a permit is extended as a lock on its
	// slot's key.
	acquirePermitScript = driver.NewScript("acquire_permit", nodeSrc+acquirePermitSrc)
	releasePermitScript = driver.NewScript("release_permit", counterSrc+releasePermitSrc)

	// The scripts of an election, besides the lock's.
	electScript  = driver.NewScript("elect", holderSrc+electSrc)
	leaderScript = driver.NewScript("leader", "#!lua flags=no-writes\n"+holderSrc+leaderSrc)

	// The scripts of a read-write lock besides the lock's, which extend
	// and release its writer; and Adopt's, which writes only the fence
	// counter.
	rwReadScript    = driver.NewScript("rw_read", nodeSrc+rwAdmitSrc+rwReadSrc)
	rwWriteScript   = driver.NewScript("rw_write", nodeSrc+rwAdmitSrc+rwWriteSrc)
	rwReleaseScript = driver.NewScript("rw_release", counterSrc+rwReleaseSrc)
	rwExtendScript  = driver.NewScript("rw_extend", nodeSrc+rwExtendSrc)
	rwDropScript    = driver.NewScript("rw_drop", rwDropSrc)
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
