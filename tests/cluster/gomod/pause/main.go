// Command pause is PID 1 of every pod sandbox on the procmesh test cluster's real node: it holds
// the pod's namespaces open, reaps the zombies re-parented to it, and exits on SIGINT or SIGTERM.
// We build our own because registry.k8s.io/pause cannot be pulled on the test machines.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 16)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
