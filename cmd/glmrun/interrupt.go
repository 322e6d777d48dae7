package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"sync"
)

// Ctrl-C during generation is a request, not a failure: as llama-cli, the
// first SIGINT stops the generation, which ends as usual (the text so far,
// the timings, "stopped: interrupted") with exit status 0; a second one
// while it is still stopping (a long prompt evaluation between two checks
// of the context, say) exits at once with 130, the status a shell gives a
// program killed by SIGINT.

// Variables so that tests can deliver interrupts and observe the exit
// without signalling the test process.
var (
	notifyInterrupt = func(c chan<- os.Signal) { signal.Notify(c, os.Interrupt) }
	stopInterrupt   = func(c chan<- os.Signal) { signal.Stop(c) }
	exitProcess     = os.Exit
)

// exitInterrupted is the exit status of a second Ctrl-C.
const exitInterrupted = 130

// errInterrupt is the cause of a context that a SIGINT canceled, to tell
// it from one that stop canceled.
var errInterrupt = errors.New("interrupted")

// interruptible returns a context that the first SIGINT cancels and a
// stop function that restores SIGINT's default action; until stop, a
// second SIGINT exits the process with status 130.
func interruptible(parent context.Context) (context.Context, func()) {
	sigs := make(chan os.Signal, 2)
	notifyInterrupt(sigs)
	ctx, stop := watchInterrupts(parent, sigs, exitProcess)
	return ctx, func() {
		stopInterrupt(sigs)
		stop()
	}
}

// watchInterrupts cancels the returned context on the first value from
// sigs and calls exit(130) on the second, until stop is called.
func watchInterrupts(parent context.Context, sigs <-chan os.Signal, exit func(int)) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		select {
		case <-sigs:
			cancel(errInterrupt)
		case <-done:
			return
		}
		select {
		case <-sigs:
			exit(exitInterrupted)
		case <-done:
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			close(done)
			<-finished // no exit after stop returns
			cancel(nil)
		})
	}
}

// interrupted reports whether err is the end of a generation that a
// Ctrl-C stopped through ctx (from interruptible), which is no error for
// the CLI. It holds after stop too.
func interrupted(ctx context.Context, err error) bool {
	return errors.Is(err, context.Canceled) && errors.Is(context.Cause(ctx), errInterrupt)
}
