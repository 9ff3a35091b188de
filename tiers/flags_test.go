package tiers

import "flag"

// The randomized tests' flags: a seed to reproduce a run (0: from the
// clock, logged) and the number of steps.
var (
	hostSeed  = flag.Uint64("host.seed", 0, "seed for TestHostRandom (0: from the clock)")
	hostSteps = flag.Int("host.steps", 3000, "steps of TestHostRandom")
	ssdSeed   = flag.Uint64("ssd.seed", 0, "seed for TestSSDRandom (0: from the clock)")
	ssdSteps  = flag.Int("ssd.steps", 800, "steps of TestSSDRandom")
	gpuSeed   = flag.Uint64("gpu.seed", 0, "seed for TestGPUAllocRandom (0: from the clock)")
	gpuSteps  = flag.Int("gpu.steps", 20000, "steps of TestGPUAllocRandom")
)
