// Built together with gohot.go (`go build gohot.go gohot_cgo.go`), makes it
// a cgo program: dynamically linked, its threads made by pthread_create,
// the runtime preloaded, Go's own signal handlers beside strobe's.
package main

// #include <stdlib.h>
import "C"

func init() {
	_ = C.abs(1)
}
