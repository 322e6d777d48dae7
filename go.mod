module github.com/glmrun/glmrun

go 1.26.0

require (
	github.com/ardanlabs/jinja v1.8.0
	github.com/ebitengine/purego v0.11.3
	golang.org/x/sys v0.50.0
)
