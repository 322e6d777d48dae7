package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/glmrun/glmrun"
	"github.com/glmrun/glmrun/attention"
	"github.com/glmrun/glmrun/internal/units"
	"github.com/glmrun/glmrun/server"
)

// runServe is "glmrun serve": the OpenAI-compatible HTTP server. It runs
// until SIGINT or SIGTERM, then lets running requests finish (for at most
// --shutdown-timeout) and exits 0.
func runServe(args []string, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return serve(ctx, args, stderr, nil)
}

// serve runs the server until ctx ends. ready, if set, gets the address
// it listens on.
func serve(ctx context.Context, args []string, stderr io.Writer, ready func(addr string)) error {
	fs := newFlagSet("serve", stderr)
	var (
		modelFlag, host, apiKey, backend, alias string
		port, parallel, ctxSize, tp, threads    int
		queue                                   int
		maxBody                                 int64
		shutdownTimeout                         time.Duration
	)
	fs.StringVar(&modelFlag, "m", "", "model `FILE.gguf`; the first shard of a split model (default: the bundled "+defaultModelRel+")")
	fs.StringVar(&modelFlag, "model", "", "same as -m `FILE.gguf`")
	fs.StringVar(&host, "host", "127.0.0.1", "`address` to listen on (loopback by default; 0.0.0.0 for every interface)")
	fs.IntVar(&port, "port", 8080, "TCP `port` to listen on (0: any free port)")
	fs.IntVar(&parallel, "parallel", server.DefaultParallel, "sequences that decode together, each with its own KV cache slot (`N`)")
	fs.IntVar(&parallel, "np", server.DefaultParallel, "same as --parallel `N`")
	fs.IntVar(&ctxSize, "ctx-size", 0, "context `tokens` per sequence, prompt and reply: each slot's KV cache is allocated for this many once (0: the model's training context, lowered so that --parallel caches fit in 3/4 of the memory available; more than the training context only as far as the model's RoPE scaling extends it)")
	fs.IntVar(&ctxSize, "c", 0, "same as --ctx-size `N`")
	var cache cacheFlags
	cache.register(fs)
	var placement deviceFlags
	placement.register(fs)
	fs.IntVar(&queue, "queue", server.DefaultQueueSize, "requests that may wait for a slot before the server answers 503 (`N`)")
	fs.StringVar(&apiKey, "api-key", "", "require `KEY` as \"Authorization: Bearer KEY\" on /v1/ (default: the GLMRUN_API_KEY environment variable, or none)")
	fs.StringVar(&alias, "alias", "", "model `name` in /v1/models and responses (default: the file name without .gguf)")
	fs.Int64Var(&maxBody, "max-body", server.DefaultMaxBodyBytes, "largest request body in `bytes`")
	fs.StringVar(&backend, "backend", "cpu", "compute `backend`: cpu or cuda")
	fs.IntVar(&tp, "tp", 1, "tensor parallelism: split the model over `N` devices")
	fs.IntVar(&threads, "t", 0, "worker `threads` per device (0: the physical cores)")
	exact := fs.Bool("exact", false, "float32 activations in every matrix product (slower) instead of the fast quantized-activation kernels")
	invariant := fs.Bool("batch-invariant", false, batchInvariantUsage)
	noRepack := fs.Bool("no-repack", false, noRepackUsage)
	force := fs.Bool("force", false, forceUsage)
	specMTP := fs.Int("spec-mtp", 0, specMTPUsage+"; a request lowers it with speculative.n_max")
	cacheRAM := fs.Int64("cache-ram", -1, "host memory of the prefix cache in `MiB`: the KV rows of prompts that ran, reused by later requests that start with the same tokens (-1: a quarter of the available memory, at most 8192; 0: off)")
	special := fs.Bool("special", false, "show control tokens (<|assistant|>, <think>, <tool_call>, ...) in replies as their text")
	fs.IntVar(&threads, "threads", 0, "same as -t `N`")
	fs.DurationVar(&shutdownTimeout, "shutdown-timeout", 30*time.Second, "on SIGINT/SIGTERM, how long running requests may take to finish before they are cut (`duration`)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), serveUsage)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	warnings, err := serveFlags{host: host, backend: backend, port: port, parallel: parallel, ctxSize: ctxSize,
		queue: queue, tp: tp, threads: threads, maxBody: maxBody, shutdownTimeout: shutdownTimeout}.check()
	if err != nil {
		return err
	}
	printWarnings(stderr, "serve", warnings)
	if err := placement.check(); err != nil {
		return err
	}
	if _, err := cache.parse(); err != nil {
		return err
	}
	if *specMTP < 0 || *specMTP > maxSpecDraft {
		return usageErr("--spec-mtp %d: want 0 (off) to %d drafted tokens", *specMTP, maxSpecDraft)
	}
	if *cacheRAM < -1 || *cacheRAM > 1<<30 {
		return usageErr("--cache-ram %d: want -1 (automatic), 0 (off) or MiB", *cacheRAM)
	}
	prefixBytes := *cacheRAM << 20 // -1: automatic (0 in server.Config)
	switch *cacheRAM {
	case -1:
		prefixBytes = 0
	case 0:
		prefixBytes = -1
	}
	if apiKey == "" {
		apiKey = os.Getenv("GLMRUN_API_KEY")
	}
	path, err := modelPath(modelFlag)
	if err != nil {
		return err
	}
	if alias == "" {
		alias = strings.TrimSuffix(filepath.Base(path), ".gguf")
	}

	// The library's loading path, as generate and chat load: the server
	// serves the model glmrun.Load gives any program.
	start := time.Now()
	m, err := glmrun.Load(path, glmrun.Options{Threads: threads, TensorParallel: tp, CPUMoE: placement.all, NCPUMoE: placement.n, Collectives: placement.collectives, Backend: backend, Exact: *exact, CacheType: cache.k,
		BatchInvariant: *invariant, NoRepack: *noRepack, AllowUnknownKeys: *force, SpecDraft: *specMTP})
	if err != nil {
		return err
	}
	// Deferred first, so that it runs last: the server's steps read the
	// weights until srv.Close returns.
	defer m.Close()
	if err := m.TemplateErr(); err != nil {
		// chat fails on it at the first turn; the server would fail every
		// chat request, so it does not start.
		return err
	}
	if m.Template().Builtin() {
		fmt.Fprintf(stderr, "glmrun serve: %s has no chat template; using the built-in GLM-5 format\n", path)
	}
	printWarnings(stderr, "serve", m.Warnings())
	srv, err := server.New(server.Config{
		Model: m, ModelID: alias, Parallel: parallel, ContextSize: ctxSize,
		QueueSize: queue, APIKey: apiKey, MaxBodyBytes: maxBody, Special: *special, ModelPath: path,
		SpecDraft: *specMTP, PrefixCacheBytes: prefixBytes,
	})
	if err != nil {
		return err
	}
	defer srv.Close()

	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 30 * time.Second}
	addr := ln.Addr().String()
	fmt.Fprintf(stderr, "glmrun serve: %s (%s) loaded in %v; %d slots of %d tokens, KV cache %s per slot (%s)\n",
		alias, m.Config().Arch, time.Since(start).Round(time.Millisecond), parallel, srv.ContextSize(),
		units.Bytes(srv.SlotCacheBytes()), attention.CacheTypeName(m.CacheType()))
	printRepacked(stderr, "glmrun serve", m.RepackedBytes())
	if note := srv.ContextNote(); note != "" {
		fmt.Fprintf(stderr, "glmrun serve: %s\n", note)
	}
	fmt.Fprintf(stderr, "glmrun serve: listening on http://%s (OpenAI API at http://%s/v1)\n", addr, addr)
	if apiKey == "" && !isLoopback(host) {
		fmt.Fprintf(stderr, "glmrun serve: warning: listening on %s without --api-key\n", host)
	}
	if ready != nil {
		ready(addr)
	}

	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	fmt.Fprintf(stderr, "glmrun serve: shutting down: letting running requests finish (at most %v)\n", shutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		fmt.Fprintf(stderr, "glmrun serve: %v: cutting the requests still running\n", err)
		srv.Close() // their streams end with an error event
		hs.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
