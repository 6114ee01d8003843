package replay

import (
	"testing"

	"github.com/tandemdb/tandem/targets"
)

// A zero Config runs the documented defaults (the CLI's flags show the
// same constants: cmd/tandem TestSharedFlagsAgree).
func TestConfigDefaults(t *testing.T) {
	c := Config{Capture: "x", RunDir: "y", Targets: []targets.Target{{Name: "a"}}}
	if err := c.check(); err != nil {
		t.Fatal(err)
	}
	if c.OrderInflight != DefaultOrderInflight || c.OrderTimeout != DefaultOrderTimeout || c.Retries != DefaultRetries || c.TargetTimeout != DefaultTargetTimeout {
		t.Errorf("zero Config: inflight %v, timeout %v, retries %d, target timeout %v", c.OrderInflight, c.OrderTimeout, c.Retries, c.TargetTimeout)
	}
	c.Retries, c.TargetTimeout = -1, -1
	if err := c.check(); err != nil || c.Retries != 0 || c.TargetTimeout != 0 {
		t.Errorf("negative: retries %d, target timeout %v (%v); want none and no bound", c.Retries, c.TargetTimeout, err)
	}
}
