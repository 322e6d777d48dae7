module github.com/glmrun/glmrun

go 1.26
