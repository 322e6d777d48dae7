package main

import (
	"net"
	"regexp"
	"time"
)

const serveUsage = `usage: glmrun serve [-m MODEL.gguf] [--host ADDR] [--port 8080] [--parallel N] [-c CTX] [--api-key KEY] [flags]

Serves the model over an OpenAI-compatible HTTP API (/v1/chat/completions,
/v1/completions, /v1/models, /health, /metrics) with continuous batching:
--parallel sequences decode together, each in its own KV cache slot of -c
tokens. Sampling is per request. Without -m, the bundled tiny
random-weights model is served. SIGINT or SIGTERM lets running requests
finish (at most --shutdown-timeout) and exits 0.

flags:
`

// serveFlags are the values of serve's flags that check validates.
type serveFlags struct {
	host                                        string
	backend                                     string
	port, parallel, ctxSize, queue, tp, threads int
	maxBody                                     int64
	shutdownTimeout                             time.Duration
}

// hostRE matches a host name (an IP address is checked apart).
var hostRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$`)

// check validates serve's flags before the model is loaded, which can
// take minutes: a usage error naming the flag, or the warnings to print.
func (sf serveFlags) check() (warnings []string, err error) {
	switch {
	case sf.host == "":
		return nil, usageErr("--host \"\": want an address (0.0.0.0 for every interface)")
	case net.ParseIP(sf.host) == nil && !hostRE.MatchString(sf.host):
		return nil, usageErr("--host %q: want an IP address or a host name", sf.host)
	case sf.port < 0 || sf.port > 65535:
		return nil, usageErr("--port %d is not a TCP port (0-65535; 0: any free one)", sf.port)
	case sf.parallel < 1:
		return nil, usageErr("--parallel %d: need at least 1", sf.parallel)
	case sf.ctxSize < 0:
		return nil, usageErr("--ctx-size %d is negative (0: the default)", sf.ctxSize)
	case sf.queue < 1:
		return nil, usageErr("--queue %d: need at least 1", sf.queue)
	case sf.maxBody < 1:
		return nil, usageErr("--max-body %d: need at least 1", sf.maxBody)
	case sf.tp < 1:
		return nil, usageErr("--tp %d: need at least 1", sf.tp)
	case sf.shutdownTimeout < 0:
		return nil, usageErr("--shutdown-timeout %v is negative (0: cut running requests at once)", sf.shutdownTimeout)
	}
	if err := checkDevices("-t (--threads)", sf.threads, sf.tp, sf.backend, &warnings); err != nil {
		return nil, err
	}
	return warnings, nil
}
