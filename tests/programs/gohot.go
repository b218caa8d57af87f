// gohot: a pure Go program (static, nothing can be preloaded): two
// goroutines each spend about 70% of their CPU in hotA and 30% in hotB.
package main

import (
	"fmt"
	"sync"
)

var sink float64

//go:noinline
func hotA(n int) float64 {
	x := 1.0
	for i := 0; i < n; i++ {
		x = x*1.0000001 + 0.5/(x+float64(i))
	}
	return x
}

//go:noinline
func hotB(n int) float64 {
	x := 2.0
	for i := 0; i < n; i++ {
		x = x*0.9999999 + 0.25/(x+float64(i))
	}
	return x
}

func work(wg *sync.WaitGroup, out *float64) {
	defer wg.Done()
	s := 0.0
	for k := 0; k < 100; k++ {
		s += hotA(700000)
		s += hotB(300000)
	}
	*out = s
}

func main() {
	var wg sync.WaitGroup
	r := make([]float64, 2)
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go work(&wg, &r[i])
	}
	wg.Wait()
	fmt.Println("done", r[0] > 0 && r[1] > 0)
}
