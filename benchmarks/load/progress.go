package load

import (
	"github.com/schollz/progressbar/v3"
)

// bar counts cases done out of all cases; nil writer: no bar.
type bar struct {
	pb *progressbar.ProgressBar
}

func newBar(cfg Config, systems []System) *bar {
	if cfg.Progress == nil {
		return &bar{}
	}
	total := len(systems) * len(cfg.PageSizes) * len(cfg.Ops) * len(cfg.Concurrency)
	return &bar{pb: progressbar.NewOptions(total,
		progressbar.OptionSetWriter(cfg.Progress),
		progressbar.OptionSetDescription("cases"),
		progressbar.OptionShowCount(),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionSetWidth(30),
		progressbar.OptionClearOnFinish(),
	)}
}

func (b *bar) describe(s string) {
	if b.pb != nil {
		b.pb.Describe(s)
	}
}

// done counts a case run; skip one the system has no equivalent for.
func (b *bar) done() {
	if b.pb != nil {
		_ = b.pb.Add(1)
	}
}

func (b *bar) skip() { b.done() }

func (b *bar) finish() {
	if b.pb != nil {
		_ = b.pb.Finish()
	}
}
