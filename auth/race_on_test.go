//go:build race

package auth

// raceEnabled: the race detector keeps shadow memory for every heap page
// ever used, so resident-memory checks read the Go runtime's own figures
// (or a binary built without it) instead of this process's VmRSS.
const raceEnabled = true
