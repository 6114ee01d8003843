// Command gen writes Tandem's Grafana dashboard (package grafana) to the
// file named by its argument.
package main

import (
	"fmt"
	"os"

	"github.com/tandemdb/tandem/grafana"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gen FILE")
		os.Exit(2)
	}
	b, err := grafana.JSON(grafana.New())
	if err == nil {
		err = os.WriteFile(os.Args[1], b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
