// Package bench holds the comparative benchmarks of sluice against other
// rate limiters. It is a separate module so that the peers it measures never
// become dependencies of sluice itself.
package bench
