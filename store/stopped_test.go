package store

import (
	"errors"
	"testing"
)

// A stop at the budget is ErrStopped and ErrBudget; one at the disk's
// floor is ErrStopped only; the text is the reason after the prefix.
func TestStoppedErrorSaysWhetherTheBudgetStoppedIt(t *testing.T) {
	b := error(&stoppedError{why: "the capture reached its budget", budget: true})
	d := error(&stoppedError{why: "the disk is nearly full"})
	if !errors.Is(b, ErrStopped) || !errors.Is(b, ErrBudget) || !errors.Is(d, ErrStopped) || errors.Is(d, ErrBudget) {
		t.Errorf("Is: budget %v %v, disk %v %v", errors.Is(b, ErrStopped), errors.Is(b, ErrBudget), errors.Is(d, ErrStopped), errors.Is(d, ErrBudget))
	}
	if b.Error() != "store: capture stopped: the capture reached its budget" {
		t.Errorf("text %q", b.Error())
	}
}
