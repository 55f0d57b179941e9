package netns

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// Do runs fn on a locked OS thread that is inside the named namespace, then restores the
// thread's namespace (if restoring fails, leave the thread locked so Go discards it).
//
// Do is the only way this package enters a namespace. Thread caveats:
//   - fn runs on a new goroutine that is locked to its OS thread; only that thread is in
//     the namespace. Goroutines that fn starts run on other threads, in the caller's
//     namespace (this includes Go's DNS resolver), so fn must create its sockets, netlink
//     handles and child processes itself.
//   - Sockets and processes created inside fn stay in the namespace after Do returns.
//   - If the original namespace cannot be restored, the goroutine exits still locked, so
//     the Go runtime terminates the tainted thread instead of reusing it.
//
// A panic in fn is re-raised in the caller after the namespace has been restored.
func Do(name string, fn func() error) error {
	target, err := openNamespace(name)
	if err != nil {
		return err
	}
	defer unix.Close(target)
	return doIn(target, fmt.Sprintf("%q", name), fn, false)
}

// DoFd is Do for a namespace held as an open file descriptor (one handed over by another
// process, as istio-cni hands a pod's namespace to ztunnel) instead of a name. fd stays
// open and owned by the caller; the thread caveats of Do hold.
func DoFd(fd int, fn func() error) error {
	return doIn(fd, fmt.Sprintf("fd %d", fd), fn, false)
}

// doIn runs fn on a locked thread inside the namespace target (label names it in errors).
// With discard the thread is never used again (fn changed more of it than its
// namespace): the runtime ends it with the goroutine.
func doIn(target int, label string, fn func() error, discard bool) error {
	type result struct {
		err   error
		panic any
	}
	done := make(chan result, 1)
	start := func(body func()) { go func() { runtime.LockOSThread(); body() }() }
	if discard {
		start = onDisposableThread
	}
	start(func() {
		origin, err := unix.Open(threadNSPath(), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("open current netns: %w", err)}
			return
		}
		defer unix.Close(origin)
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("enter netns %s: %w", label, err)}
			return
		}
		var res result
		func() {
			defer func() { res.panic = recover() }()
			res.err = fn()
		}()
		if discard {
			done <- res
			return
		}
		if err := unix.Setns(origin, unix.CLONE_NEWNET); err != nil {
			// Leave the thread locked: the runtime discards it when this goroutine ends.
			if res.err == nil {
				res.err = fmt.Errorf("restore netns after %s: %w", label, err)
			}
			done <- res
			return
		}
		runtime.UnlockOSThread()
		done <- res
	})
	res := <-done
	if res.panic != nil {
		panic(res.panic)
	}
	return res.err
}

// onDisposableThread runs fn in a new goroutine locked to a thread that ends with it (fn
// must not unlock it): for fn that changes its thread for good (its namespaces, fs,
// capabilities). Never the main thread: the runtime keeps that one, parked, when its
// locked goroutine ends, and it is the thread /proc/self names, which would then show
// fn's namespaces to the rest of the process.
func onDisposableThread(fn func()) {
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() != unix.Getpid() {
			fn()
			return
		}
		// Hold the main thread while fn runs on another: a locked thread runs only its
		// own goroutine, so fn's cannot be given this one.
		defer runtime.UnlockOSThread()
		ran := make(chan struct{})
		onDisposableThread(func() { defer close(ran); fn() })
		<-ran
	}()
}

// threadNSPath is the network namespace file of the calling OS thread.
func threadNSPath() string {
	return fmt.Sprintf("/proc/%d/task/%d/ns/net", unix.Getpid(), unix.Gettid())
}
