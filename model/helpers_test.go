package model

import (
	"testing"

	_ "github.com/glmrun/glmrun/backend/cpu" // registers the "cpu" backend

	"github.com/glmrun/glmrun/internal/testmodels"
)

// modelPath returns the path of a golden model: shipped in testdata/models
// or derived (sparse, nextn) by testmodels.
func modelPath(t testing.TB, name string) string {
	t.Helper()
	return testmodels.Path(t, name)
}
