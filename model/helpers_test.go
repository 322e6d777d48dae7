package model

import (
	"testing"

	"github.com/glmrun/glmrun/internal/testmodels"
)

// modelPath returns the path of a golden model: shipped in testdata/models
// or derived (sparse, nextn) by testmodels.
func modelPath(t *testing.T, name string) string {
	t.Helper()
	return testmodels.Path(t, name)
}
