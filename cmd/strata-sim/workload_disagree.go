package main

import "math/rand/v2"

// Workloads that disagree (issue 44, step 4): generated traffic whose best
// fixed half-life of the cost policy is far from the synthetic trace's, so
// that a policy tuned on one is measured on the other.
//
//   - recency: a conversation mix where reuse follows recency alone. Many
//     short system prompts, none hot; sessions of 8 to 15 turns whose
//     every turn re-reads the whole history, then end. A page's reuse
//     count grows with its session's age, and the older a session the
//     sooner it ends: the pages with the most counts are the nearest to
//     their last use, or past it. Counting past reuse (a long half-life)
//     keeps the dying and drops the live; recency does not.
//   - scan: a small hot set of templates (few-shot prompts, Zipf-popular,
//     each request adds a short single-use question) under a stream of
//     long scans: batch jobs that read documents of tens of thousands of
//     tokens, most once, some again in a cyclic pass over a corpus larger
//     than the smaller caches. The scans are most of the blocks; recency
//     lets each one flush the hot set, counting reuse (a long half-life)
//     keeps it.
//
// As in workload.go, the figures are stated in the params below; nothing in
// the policy reads them.

// recencyParams describes the recency workload.
var recencyParams = struct {
	requests      int     // requests to emit
	systemPrompts int     // distinct system prompts, equally popular
	sessionEvery  float64 // ms between session arrivals (exponential)
	turns         int     // least turns of a session
	turnSpread    int     // a session has turns + [0, turnSpread) turns
	thinkMs       float64 // mean think time between turns
	userTokens    float64 // median tokens of a user message
	answerTokens  float64 // median tokens of an answer
}{requests: 4000, systemPrompts: 256, sessionEvery: 2500, turns: 8, turnSpread: 8, thinkMs: 25_000,
	userTokens: 250, answerTokens: 450}

// scanParams describes the scan workload.
var scanParams = struct {
	requests    int     // requests to emit
	templates   int     // distinct hot templates, Zipf(1.1)-popular
	templateMax int     // tokens of the longest template
	every       float64 // ms between requests (exponential)
	scanShare   float64 // share of requests that are a scan
	corpus      int     // documents of the cyclic corpus
	rescan      float64 // share of scans that read the corpus's next document, not a new one
	docTokens   float64 // median tokens of a scanned document
	userTokens  float64 // median tokens of a question to a template
}{requests: 4000, templates: 48, templateMax: 6000, every: 300, scanShare: 0.45, corpus: 150,
	rescan: 0.4, docTokens: 16_000, userTokens: 120}

// genRecency is the recency-driven conversation workload of seed.
func genRecency(seed uint64) []record {
	p := recencyParams
	s := &genSim{r: rand.New(rand.NewPCG(seed, 0x4ece7c)), want: p.requests}
	systems := s.prompts(p.systemPrompts, 100, 800)
	var arrive func(t float64)
	arrive = func(t float64) {
		c := systems[s.r.IntN(len(systems))].fork()
		s.chat(c, p.turns+s.r.IntN(p.turnSpread), t, genParams{userTokens: p.userTokens, answerTokens: p.answerTokens, thinkMs: p.thinkMs})
		s.at(t+s.exp(p.sessionEvery), arrive)
	}
	s.at(0, arrive)
	return s.run()
}

// genScan is the scan-heavy workload of seed.
func genScan(seed uint64) []record {
	p := scanParams
	s := &genSim{r: rand.New(rand.NewPCG(seed, 0x5ca9)), want: p.requests}
	templates := s.prompts(p.templates, 500, p.templateMax)
	corpus := make([]genCtx, p.corpus)
	for i := range corpus {
		corpus[i].extend(&s.ids, s.lognormal(p.docTokens, 0.5, 2000, 60_000))
	}
	next := 0 // the corpus's document the next rescan reads
	var arrive func(t float64)
	arrive = func(t float64) {
		switch {
		case s.r.Float64() >= p.scanShare:
			c := templates[s.zipf(len(templates))].fork()
			c.extend(&s.ids, s.lognormal(p.userTokens, 0.6, 10, 2000))
			s.emit(t, &c, s.lognormal(200, 0.6, 5, 2000))
		case s.r.Float64() < p.rescan:
			s.emit(t, &corpus[next], s.lognormal(300, 0.6, 5, 2000))
			next = (next + 1) % len(corpus)
		default:
			var c genCtx
			c.extend(&s.ids, s.lognormal(p.docTokens, 0.5, 2000, 60_000))
			s.emit(t, &c, s.lognormal(300, 0.6, 5, 2000))
		}
		s.at(t+s.exp(p.every), arrive)
	}
	s.at(0, arrive)
	return s.run()
}
