// Package mutant puts known holes back into the protocol, one at a time,
// for the deterministic simulator (faulttest/sim) to find: a measure of
// the simulator, not a feature. A mutant is on only in a build with the
// tag redlock_mutants; in every other build On is false and the checks
// that call it compile to nothing.
//
// Each name is a rule the code keeps, turned off:
//
//	hearing-all-slots       a hearing of every node counts for every slot
//	                        (a young node's vote trusted across slots)
//	adopt-fence-answering   Adopt's fence is drawn only from the nodes
//	                        that answer, not carried by the hand-over
//	identity-once           a node's server is probed once and never again
//	identity-error-distinct a probe that fails with an error reply counts
//	                        the node as a server of its own
//	extend-no-identity      Extend counts every entry, known or not
//	ttl-as-left             nodes report the time left of their grants
//	                        rather than their TTL
//	adopt-no-fence          Adopt draws no fence: the adopter gets the
//	                        counter as it stands
//	release-no-raise        a release does not raise the fence counter
//
// Canaries that need no mutant are options: quarantine off
// (DisableQuarantine) and no drift allowance (Options.Drift).
package mutant
