package load

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stratakv/strata/client"
)

// smallTransfer is a 1 MiB prompt in 64 KiB pages: the node's host tier
// of 16 MiB lets the tenant pin 2 MiB (an eighth).
var smallTransfer = TransferConfig{Bytes: 1 << 20, PageBytes: 64 << 10, Streams: []int{1, 2}, Rounds: 2}

// TestTransferSystems moves a small prompt through every transfer system
// but Mooncake, a node of its own process and producer and consumer
// processes for each strata transport: every transfer completes, its
// parts are timed, and on the node every room was published and
// acknowledged and nothing stays pinned.
func TestTransferSystems(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two nodes, four peer processes and a page server")
	}
	p := smallTransfer.Params()
	var systems []TransferSystem
	defer func() {
		for _, s := range systems {
			if err := s.Close(); err != nil {
				t.Error(err)
			}
		}
	}()
	var stratas []*StrataTransfer
	for _, tr := range []string{"tcp", "shm"} {
		s, err := StartStrataTransfer(t.Context(), StrataConfig{Transport: tr, HostBytes: 16 << 20}, p)
		if err != nil {
			t.Fatal(err)
		}
		systems, stratas = append(systems, s), append(stratas, s)
	}
	tcp, err := StartTCPTransfer(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	systems = append(systems, tcp, NewMemcpyTransfer(p))
	res, err := RunTransfer(t.Context(), smallTransfer, systems)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2*len(systems) {
		t.Fatalf("%d results, want one per system and case", len(res))
	}
	for _, r := range res {
		if r.Err != "" || len(r.Timings) != 2 {
			t.Errorf("%s, %d streams: %d transfers, %q", r.System, r.Streams, len(r.Timings), r.Err)
		}
		for _, tm := range r.Timings {
			if tm.Put <= 0 || tm.Loaded <= 0 || strings.HasPrefix(r.System, "strata") != (tm.Publish > 0 && tm.Ack > 0) {
				t.Errorf("%s: timing %+v", r.System, tm)
			}
		}
	}
	for _, s := range stratas {
		c, err := client.Dial(t.Context(), s.s.cfg.Addr, client.Options{NoShm: true})
		if err != nil {
			t.Fatal(err)
		}
		rooms, err := c.ListRooms(t.Context(), "")
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		acked := 0
		for _, infos := range rooms {
			for _, info := range infos {
				if info.GetState().String() == "ROOM_STATE_ACKED" && info.GetBytes() == uint64(p.Bytes()) {
					acked++
				}
			}
		}
		if want := 2 * (1 + smallTransfer.Rounds); acked != want { // a warm-up and the rounds, per case
			t.Errorf("%s: the node holds %d acknowledged rooms of %d bytes, want %d: %v", s.Name(), acked, p.Bytes(), want, rooms)
		}
	}
}

// TestMooncakeTransfer moves a small prompt through Mooncake Store with
// the interpreter in $STRATA_MOONCAKE_PYTHON (benchmarks/mooncake-venv.sh
// builds it); skipped without it.
func TestMooncakeTransfer(t *testing.T) {
	py := os.Getenv(MooncakePythonEnv)
	if py == "" {
		t.Skipf("$%s not set (benchmarks/mooncake-venv.sh)", MooncakePythonEnv)
	}
	m, err := StartMooncakeTransfer(t.Context(), py, smallTransfer.Params())
	if err != nil {
		t.Fatal(err)
	}
	res, err := RunTransfer(t.Context(), smallTransfer, []TransferSystem{m})
	if err = errors.Join(err, m.Close()); err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != "" || len(r.Timings) != smallTransfer.Rounds || r.Timings[0].Put <= 0 || r.Timings[0].Loaded <= 0 {
			t.Errorf("%d streams: %+v", r.Streams, r)
		}
	}
}

// TestTransferConsumerChecksPages: a consumer handed another transfer's
// pages than it expects refuses them, and its abort and ack leave the
// room aborted by a consumer failure, nothing pinned.
func TestTransferConsumerChecksPages(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node and two peer processes")
	}
	s, err := StartStrataTransfer(t.Context(), StrataConfig{Transport: "tcp", HostBytes: 16 << 20}, smallTransfer.Params())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}()
	consumed := make(chan error, 1)
	go func() {
		_, err := askTimes(s.cons, "consume wrong 2 1")
		consumed <- err
	}()
	if _, err := askTimes(s.prod, "produce wrong 1 2"); err != nil {
		t.Fatal(err)
	}
	err = <-consumed
	if err == nil || !strings.Contains(err.Error(), "holds page 0 of transfer 1, want page 0 of 2") {
		t.Fatalf("the consumer of transfer 2 given transfer 1's pages: %v", err)
	}
	c, err := client.Dial(t.Context(), s.s.cfg.Addr, client.Options{NoShm: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	info, err := c.RoomStatus(t.Context(), "wrong")
	if err != nil || info.GetState().String() != "ROOM_STATE_ABORTED" || info.GetReason() != client.ConsumerFailure {
		t.Fatalf("the room after the refusal: %v, %v", info, err)
	}
	if err := s.prod.call("drop 1"); err != nil {
		t.Fatalf("dropping the pages: %v (still pinned?)", err)
	}
}

// turnsTransfer records the transfers it is asked for, and fails the
// ones numbered in fail.
type turnsTransfer struct {
	name string
	log  *[]string
	fail map[int]bool
}

func (s turnsTransfer) Name() string { return s.name }
func (turnsTransfer) Close() error   { return nil }
func (s turnsTransfer) Move(_ context.Context, n, streams int) (Timing, error) {
	*s.log = append(*s.log, fmt.Sprintf("%s%d/%d", s.name, n, streams))
	if s.fail[n] {
		return Timing{}, errors.New("failed")
	}
	return Timing{Put: time.Duration(n), Loaded: time.Duration(n)}, nil
}

// TestRunTransferTurns: per case each system warms up once, then the
// systems take turns round by round, every transfer with a number of its
// own; a system whose transfer fails makes no more in that case.
func TestRunTransferTurns(t *testing.T) {
	var log []string
	systems := []TransferSystem{turnsTransfer{"a", &log, nil}, turnsTransfer{"b", &log, map[int]bool{4: true}}}
	res, err := RunTransfer(t.Context(), TransferConfig{Bytes: 4, PageBytes: 1, Streams: []int{1, 2}, Rounds: 2}, systems)
	if err != nil {
		t.Fatal(err)
	}
	want := "a1/1 b2/1 a3/1 b4/1 a5/1 a6/2 b7/2 a8/2 b9/2 a10/2 b11/2"
	if got := strings.Join(log, " "); got != want {
		t.Fatalf("transfers %q, want %q", got, want)
	}
	if r := res[1]; r.Err != "round 1/2: failed" || len(r.Timings) != 0 {
		t.Errorf("b's first case: %+v", r)
	}
	if r := res[3]; r.Err != "" || len(r.Timings) != 2 || r.Timings[1].Put != 11 {
		t.Errorf("b's second case: %+v", r)
	}
}

// TestWriteTransferMarkdown: medians (the lower of an even count) and
// their ranges in ms, GB/s from the medians, a row's ratios to each
// baseline measured (its GB/s over the baseline's), "–" for itself and
// for one not measured, and a failed system's row.
func TestWriteTransferMarkdown(t *testing.T) {
	ms := time.Millisecond
	res := []TransferResult{
		{System: "strata-shm", Bytes: 1e9, PageBytes: 1e6, Streams: 1, Timings: []Timing{
			{Put: 100 * ms, Publish: ms, Loaded: 300 * ms, Ack: ms}, {Put: 100 * ms, Publish: ms, Loaded: 100 * ms, Ack: ms},
			{Put: 300 * ms, Publish: 2 * ms, Loaded: 400 * ms, Ack: 2 * ms}, {Put: 100 * ms, Publish: ms, Loaded: 200 * ms, Ack: ms}}},
		{System: "memcpy", Bytes: 1e9, PageBytes: 1e6, Streams: 1, Timings: []Timing{{Put: 50 * ms, Loaded: 50 * ms}}},
		{System: "tcp", Bytes: 1e9, PageBytes: 1e6, Streams: 1, Err: "round 1/1: refused"},
	}
	var b strings.Builder
	if err := WriteTransferMarkdown(&b, "# head\n", res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"# head\n",
		"## transfer of 1000000000B in 1000 pages of 1000000B, 1 stream(s) a side, 4 transfers a system",
		"| strata-shm | 200.0 (100.0–400.0) | 5.00 | 300.0 (200.0–700.0) | 3.33 | 100.0 | 1.0 | 1.0 | 0.25 / 0.33 | – | – |",
		"| memcpy | 50.0 (50.0–50.0) | 20.00 | 100.0 (100.0–100.0) | 10.00 | 50.0 | – | – | – | – | – |",
		"| tcp | failed: round 1/1: refused |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, b.String())
		}
	}
}
