module github.com/glmrun/glmrun

go 1.26.0

require (
	github.com/ardanlabs/jinja v1.8.0
	golang.org/x/sys v0.50.0
)
