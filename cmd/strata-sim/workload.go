package main

import (
	"bufio"
	"container/heap"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
)

// Workload generators: traffic in Mooncake's trace format (timestamp in
// ms, input_length, output_length, hash_ids of 512-token blocks, a hash id
// naming the whole prefix up to its block) generated at run time from a
// seed, so that no trace file is kept in the tree. --trace gen:NAME[:SEED]
// replays one (`strata-sim --trace gen:conversation:1`), --write-trace
// writes it out as JSON lines.
//
//   - conversation: chat sessions arriving at random, each a few turns
//     with a think time between them; every turn's prompt is the session's
//     system prompt (one of a few, Zipf-popular), the history so far (the
//     earlier prompts and answers) and the new user message, so a session's
//     pages are reused by its next turn only, a reuse distance of a think
//     time. A share of the requests are documents (an upload, a pasted
//     file) asked about once, rarely twice: long single-use prefixes.
//   - agent: tool-using tasks of many steps with short gaps (a tool call's
//     latency): each step's prompt is the agent's long system prompt and
//     tool definitions (one of a few agent kinds), the task so far, the
//     model's last call and the tool's output (often a large file or
//     search result); now and then a sub-agent forks the task's context
//     with new instructions, and a step is retried with the same prefix.
//
// The figures the generators take (session rates, lengths, shares) are
// stated in genParams; they describe the traffic, nothing in the policy
// reads them.

// workloads is every generator by name.
var workloads = map[string]func(seed uint64) []record{
	"conversation": genConversation,
	"agent":        genAgent,
	"recency":      genRecency, // workload_disagree.go
	"scan":         genScan,
}

// workloadNames is the generators' names, sorted, for messages.
func workloadNames() string { return "agent, conversation, recency, scan" }

// genSource parses "gen:NAME[:SEED]" and returns the generator's records,
// or ok false when source names a file.
func genSource(source string) (recs []record, ok bool, err error) {
	rest, found := strings.CutPrefix(source, "gen:")
	if !found {
		return nil, false, nil
	}
	name, seedText, _ := strings.Cut(rest, ":")
	gen, known := workloads[name]
	if !known {
		return nil, true, fmt.Errorf("--trace %s: no generator %q (want %s)", source, name, workloadNames())
	}
	seed := uint64(1)
	if seedText != "" {
		if seed, err = strconv.ParseUint(seedText, 10, 64); err != nil {
			return nil, true, fmt.Errorf("--trace %s: seed %q: %w", source, seedText, err)
		}
	}
	return gen(seed), true, nil
}

// writeRecords writes recs as a Mooncake-format JSON-lines trace.
func writeRecords(w io.Writer, recs []record) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for i := range recs {
		if err := enc.Encode(&recs[i]); err != nil {
			return fmt.Errorf("writing trace: %w", err)
		}
	}
	return bw.Flush()
}

// writeTraceFile writes recs to path.
func writeTraceFile(path string, recs []record) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("writing trace: %w", err)
	}
	if err := writeRecords(f, recs); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

const genBlockTokens = 512

// genIDs hands out hash ids: a prefix extended by a block gets a new id
// (ids name prefixes, as Mooncake's do).
type genIDs struct{ next int64 }

func (g *genIDs) fresh(n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = g.next
		g.next++
	}
	return out
}

// ctx is a growing token context: its full blocks keep their ids, the
// partial tail block is renamed whenever tokens are appended (a longer
// prefix is another block).
type genCtx struct {
	tokens int
	full   []int64 // ids of the full blocks
	tail   int64   // id of the partial last block, valid when tokens%512 > 0
}

// extend appends n tokens to c.
func (c *genCtx) extend(ids *genIDs, n int) {
	if n <= 0 {
		return
	}
	c.tokens += n
	fullNow := c.tokens / genBlockTokens
	for len(c.full) < fullNow {
		c.full = append(c.full, ids.fresh(1)[0])
	}
	if c.tokens%genBlockTokens > 0 {
		c.tail = ids.fresh(1)[0]
	}
}

// fork is a copy of c that shares its blocks.
func (c *genCtx) fork() genCtx {
	return genCtx{tokens: c.tokens, full: append([]int64(nil), c.full...), tail: c.tail}
}

// hashIDs is c's blocks as a request's hash_ids.
func (c *genCtx) hashIDs() []int64 {
	out := append([]int64(nil), c.full...)
	if c.tokens%genBlockTokens > 0 {
		out = append(out, c.tail)
	}
	return out
}

// genEvent is a request due at a time; events pop in time order.
type genEvent struct {
	at   float64 // ms
	seq  int     // tie-break: creation order
	step func(at float64)
}

type genQueue []*genEvent

func (q genQueue) Len() int { return len(q) }
func (q genQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q genQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *genQueue) Push(x any)   { *q = append(*q, x.(*genEvent)) }
func (q *genQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// genSim runs events in time order until requests are emitted.
type genSim struct {
	r    *rand.Rand
	ids  genIDs
	q    genQueue
	seq  int
	recs []record
	want int
}

func (s *genSim) at(t float64, step func(float64)) {
	s.seq++
	heap.Push(&s.q, &genEvent{at: t, seq: s.seq, step: step})
}

func (s *genSim) emit(t float64, c *genCtx, out int) {
	s.recs = append(s.recs, record{Timestamp: int64(t), InputLength: c.tokens, OutputLength: out, HashIDs: c.hashIDs()})
}

func (s *genSim) run() []record {
	for len(s.recs) < s.want && s.q.Len() > 0 {
		e := heap.Pop(&s.q).(*genEvent)
		e.step(e.at)
	}
	return s.recs
}

// exp is an exponential draw of mean m.
func (s *genSim) exp(m float64) float64 { return s.r.ExpFloat64() * m }

// lognormal draws a length whose median is med, clipped to [lo, hi].
func (s *genSim) lognormal(med, sigma float64, lo, hi int) int {
	v := med * math.Exp(sigma*s.r.NormFloat64())
	return min(max(int(v), lo), hi)
}

// genParams are the figures of a generated workload.
type genParams struct {
	requests int // requests to emit
	// conversation
	systemPrompts   int     // distinct system prompts, Zipf(1.1)-popular
	sessionEvery    float64 // ms between session arrivals (exponential)
	docShare        float64 // share of arrivals that are a document asked about
	docFollowUp     float64 // chance a document gets a second question
	meanTurns       float64 // turns per chat session (geometric)
	thinkMs         float64 // mean think time between turns
	userTokens      float64 // median tokens of a user message
	answerTokens    float64 // median tokens of an answer
	docTokens       float64 // median tokens of a document
	systemTokensMax int     // longest system prompt
	// agent
	agentKinds   int     // distinct agent system prompts (tools included)
	taskEvery    float64 // ms between task arrivals
	meanSteps    float64 // steps per task (geometric)
	toolMs       float64 // mean gap between steps (tool latency)
	toolTokens   float64 // median tokens of a tool result
	forkChance   float64 // chance a step spawns a sub-agent on the task's context
	retryChance  float64 // chance a step is sent twice (a retry)
	callTokens   float64 // median tokens of the model's tool call
	agentSysToks int     // tokens of an agent's system prompt and tools
}

// conversationParams describes the conversation workload.
var conversationParams = genParams{requests: 4000, systemPrompts: 8, sessionEvery: 900, docShare: 0.3,
	docFollowUp: 0.15, meanTurns: 4, thinkMs: 40_000, userTokens: 150, answerTokens: 350,
	docTokens: 6000, systemTokensMax: 3000}

// agentParams describes the agent workload.
var agentParams = genParams{requests: 4000, agentKinds: 4, taskEvery: 6000, meanSteps: 14, toolMs: 3000,
	toolTokens: 900, forkChance: 0.06, retryChance: 0.04, callTokens: 120, agentSysToks: 7000}

// prompts is n fresh contexts (system prompts, templates) of lo + [0,
// hi-lo) tokens each.
func (s *genSim) prompts(n, lo, hi int) []genCtx {
	out := make([]genCtx, n)
	for i := range out {
		out[i].extend(&s.ids, lo+s.r.IntN(hi-lo))
	}
	return out
}

// zipf picks one of n with probability ∝ 1/(i+1)^1.1.
func (s *genSim) zipf(n int) int {
	w, tot := make([]float64, n), 0.0
	for i := range w {
		w[i] = 1 / math.Pow(float64(i+1), 1.1)
		tot += w[i]
	}
	x := s.r.Float64() * tot
	for i, v := range w {
		if x < v {
			return i
		}
		x -= v
	}
	return n - 1
}

// genConversation is the multi-turn chat workload of seed.
func genConversation(seed uint64) []record {
	p := conversationParams
	s := &genSim{r: rand.New(rand.NewPCG(seed, 0xc0ffee)), want: p.requests}
	systems := s.prompts(p.systemPrompts, 300, p.systemTokensMax)
	var arrive func(t float64)
	arrive = func(t float64) {
		c := systems[s.zipf(len(systems))].fork()
		if s.r.Float64() < p.docShare {
			c.extend(&s.ids, s.lognormal(p.docTokens, 0.8, 600, 60_000))
			doc := c.fork()
			c.extend(&s.ids, s.lognormal(p.userTokens, 0.6, 10, 2000))
			s.emit(t, &c, s.lognormal(p.answerTokens, 0.6, 5, 4000))
			if s.r.Float64() < p.docFollowUp {
				s.at(t+s.exp(p.thinkMs), func(t float64) {
					doc.extend(&s.ids, s.lognormal(p.userTokens, 0.6, 10, 2000))
					s.emit(t, &doc, s.lognormal(p.answerTokens, 0.6, 5, 4000))
				})
			}
		} else {
			s.chat(c, 1+int(s.exp(p.meanTurns-1)+0.5), t, p)
		}
		s.at(t+s.exp(p.sessionEvery), arrive)
	}
	s.at(0, arrive)
	return s.run()
}

// chat emits a chat session on c from t: turns turns, each c extended by a
// user message (median p.userTokens), sent, then extended by its answer
// (median p.answerTokens), a think time (mean p.thinkMs) apart.
func (s *genSim) chat(c genCtx, turns int, t float64, p genParams) {
	var turn func(t float64)
	turn = func(t float64) {
		c.extend(&s.ids, s.lognormal(p.userTokens, 0.8, 5, 4000))
		out := s.lognormal(p.answerTokens, 0.7, 5, 4000)
		s.emit(t, &c, out)
		if turns--; turns > 0 {
			c.extend(&s.ids, out)
			s.at(t+s.exp(p.thinkMs), turn)
		}
	}
	turn(t)
}

// genAgent is the agent/tool workload of seed.
func genAgent(seed uint64) []record {
	p := agentParams
	s := &genSim{r: rand.New(rand.NewPCG(seed, 0xa9e27)), want: p.requests}
	kinds := s.prompts(p.agentKinds, p.agentSysToks/2, p.agentSysToks/2+p.agentSysToks)
	var task func(c genCtx, steps int, t float64)
	task = func(c genCtx, steps int, t float64) {
		var step func(t float64)
		step = func(t float64) {
			out := s.lognormal(p.callTokens, 0.7, 10, 3000)
			s.emit(t, &c, out)
			if s.r.Float64() < p.retryChance {
				again := c.fork()
				s.at(t+s.exp(500), func(t float64) { s.emit(t, &again, out) })
			}
			if s.r.Float64() < p.forkChance {
				sub := c.fork()
				sub.extend(&s.ids, s.lognormal(p.callTokens*3, 0.5, 20, 4000))
				task(sub, 1+int(s.exp(p.meanSteps/3)), t+s.exp(p.toolMs))
			}
			if steps--; steps <= 0 {
				return
			}
			c.extend(&s.ids, out+s.lognormal(p.toolTokens, 1.1, 20, 30_000))
			s.at(t+s.exp(p.toolMs), step)
		}
		s.at(t, step)
	}
	var arrive func(t float64)
	arrive = func(t float64) {
		c := kinds[s.zipf(len(kinds))].fork()
		c.extend(&s.ids, s.lognormal(400, 0.8, 20, 8000)) // the task's instructions
		task(c, 1+int(s.exp(p.meanSteps-1)), t)
		s.at(t+s.exp(p.taskEvery), arrive)
	}
	s.at(0, arrive)
	return s.run()
}
