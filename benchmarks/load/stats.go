package load

import (
	"math"
	"slices"
	"time"
)

// percentile is the nearest-rank p-quantile of lat (0 < p <= 1); it sorts
// lat.
func percentile(lat []time.Duration, p float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	slices.Sort(lat)
	return lat[max(0, int(math.Ceil(p*float64(len(lat))))-1)]
}
