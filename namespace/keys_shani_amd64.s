//go:build amd64 && !purego

#include "textflag.h"

// The native key chain (keys.go) with the x86 SHA extensions. See
// keys_shani_amd64.go for the message layout.
//
// SHA256RNDS2 X0, src, dst runs two rounds: src holds the working
// variables A,B,E,F (lanes 3,2,1,0), dst holds C,D,G,H, the low two lanes
// of X0 hold W[t]+K[t] and W[t+1]+K[t+1]; dst receives the new A,B,E,F,
// and src, unchanged, is the new C,D,G,H. So two calls with the roles of
// X1 and X2 swapped run four rounds and leave A,B,E,F in X1 and C,D,G,H in
// X2 again.
//
// Registers:
//	X0	W+K for the current rounds
//	X1, X2	state A,B,E,F and C,D,G,H
//	X3..X6	message schedule, 4 words each (word t in lane t%4)
//	X7	scratch for the schedule
//	X8	shaBswap
//	X9, X10	state at the start of the block (the feed-forward)
//	X11, X12	the initial hash value as A,B,E,F and C,D,G,H
//	X13	scratch for the output
//	DI	where the next key goes
//	SI	the next 16 bytes of tokens
//	CX	pages left
//	R8	shaK
//	R9	the next 16 bytes of padding in this page
//	R10	token groups left in this page
//	R11	groups per page, R12 blocks per page, DX the padding
//	BX	blocks left in this page

// ROUNDS4 runs rounds 4g..4g+3 with the message words in m; koff = 16*g.
#define ROUNDS4(m, koff) \
	MOVOU koff(R8), X0; \
	PADDL m, X0; \
	SHA256RNDS2 X0, X1, X2; \
	PSHUFD $0x0E, X0, X0; \
	SHA256RNDS2 X0, X2, X1

// SCHEDULE computes words t..t+3 of the message schedule into m0, which
// holds words t-16..t-13, from m1 (t-12..t-9), m2 (t-8..t-5) and m3
// (t-4..t-1): W[t] = σ1(W[t-2]) + W[t-7] + σ0(W[t-15]) + W[t-16].
// SHA256MSG1 adds the σ0 terms; SHA256MSG2 adds the σ1 terms, of words it
// computes itself for t+2 and t+3. The W[t-7] terms are added in two
// steps, W[t-7..t-5] (from m2) before SHA256MSG2 and W[t-4] (lane 0 of
// m3, for word t+3, whose value no other lane reads) after it, so that m3,
// the words just computed, feeds only SHA256MSG2 and one add: the schedule
// then keeps ahead of the rounds even when a page's first 8 words (the
// parent key) arrive only as the rounds start.
#define SCHEDULE(m0, m1, m2, m3) \
	SHA256MSG1 m1, m0; \
	MOVOU m2, X7; \
	PSRLDQ $4, X7; \
	PADDL X7, m0; \
	SHA256MSG2 m3, m0; \
	MOVOU m3, X7; \
	PSLLDQ $12, X7; \
	PADDL X7, m0

// BLOCK runs the 64 rounds of one block whose first 16 words are in
// X3..X6. It leaves the feed-forward to the caller.
#define BLOCK \
	ROUNDS4(X3, 0); \
	ROUNDS4(X4, 16); \
	ROUNDS4(X5, 32); \
	ROUNDS4(X6, 48); \
	SCHEDULE(X3, X4, X5, X6); \
	ROUNDS4(X3, 64); \
	SCHEDULE(X4, X5, X6, X3); \
	ROUNDS4(X4, 80); \
	SCHEDULE(X5, X6, X3, X4); \
	ROUNDS4(X5, 96); \
	SCHEDULE(X6, X3, X4, X5); \
	ROUNDS4(X6, 112); \
	SCHEDULE(X3, X4, X5, X6); \
	ROUNDS4(X3, 128); \
	SCHEDULE(X4, X5, X6, X3); \
	ROUNDS4(X4, 144); \
	SCHEDULE(X5, X6, X3, X4); \
	ROUNDS4(X5, 160); \
	SCHEDULE(X6, X3, X4, X5); \
	ROUNDS4(X6, 176); \
	SCHEDULE(X3, X4, X5, X6); \
	ROUNDS4(X3, 192); \
	SCHEDULE(X4, X5, X6, X3); \
	ROUNDS4(X4, 208); \
	SCHEDULE(X5, X6, X3, X4); \
	ROUNDS4(X5, 224); \
	SCHEDULE(X6, X3, X4, X5); \
	ROUNDS4(X6, 240)

// FETCH loads the next 16-byte group of the page's message into m: 4
// tokens while the page has any left, else the next group of padding.
#define FETCH(m, padlabel, donelabel) \
	TESTQ R10, R10; \
	JZ padlabel; \
	MOVOU (SI), m; \
	ADDQ $16, SI; \
	DECQ R10; \
	JMP donelabel; \
padlabel: \
	MOVOU (R9), m; \
	ADDQ $16, R9; \
donelabel: \
	PSHUFB X8, m

// func chainSHANI(dst *Key, prev *Key, tokens *uint32, pages, groups, blocks int, pad *[64]byte)
TEXT ·chainSHANI(SB), NOSPLIT, $0-56
	MOVQ dst+0(FP), DI
	MOVQ prev+8(FP), AX
	MOVQ tokens+16(FP), SI
	MOVQ pages+24(FP), CX
	MOVQ groups+32(FP), R11
	MOVQ blocks+40(FP), R12
	MOVQ pad+48(FP), DX
	LEAQ ·shaK(SB), R8
	MOVOU ·shaBswap(SB), X8

	// X11, X12 = H0..H7 as A,B,E,F and C,D,G,H.
	MOVOU ·shaIV(SB), X3  // H0 H1 H2 H3 (lanes 0..3)
	MOVOU ·shaIV+16(SB), X4 // H4 H5 H6 H7
	MOVOU X4, X11
	SHUFPS $0x11, X3, X11 // H5 H4 H1 H0 = F E B A
	MOVOU X4, X12
	SHUFPS $0xBB, X3, X12 // H7 H6 H3 H2 = H G D C

	// The first page's parent key: message words 0..7.
	MOVOU (AX), X3
	PSHUFB X8, X3
	MOVOU 16(AX), X4
	PSHUFB X8, X4

page:
	// Block 0: the parent key (X3, X4), then two groups.
	MOVQ R11, R10
	MOVQ DX, R9
	MOVOU X11, X1
	MOVOU X12, X2
	FETCH(X5, pad0, done0)
	FETCH(X6, pad1, done1)
	BLOCK
	PADDL X11, X1
	PADDL X12, X2
	MOVQ R12, BX
	DECQ BX
	JZ digest

block:
	MOVOU X1, X9
	MOVOU X2, X10
	FETCH(X3, pad2, done2)
	FETCH(X4, pad3, done3)
	FETCH(X5, pad4, done4)
	FETCH(X6, pad5, done5)
	BLOCK
	PADDL X9, X1
	PADDL X10, X2
	DECQ BX
	JNZ block

digest:
	// The key is H0..H7 = A..H: message words 0..7 of the next page, and
	// byte-swapped, the key's bytes.
	MOVOU X1, X3
	SHUFPS $0xBB, X2, X3 // A B C D
	MOVOU X1, X4
	SHUFPS $0x11, X2, X4 // E F G H
	MOVOU X3, X13
	PSHUFB X8, X13
	MOVOU X13, (DI)
	MOVOU X4, X13
	PSHUFB X8, X13
	MOVOU X13, 16(DI)
	ADDQ $32, DI
	DECQ CX
	JNZ page
	RET

// func blockChainSHANI(dst *Key, prev *Key, tokens *uint32, pages, blocks int)
//
// The sha256-blocks chain (keyformat.go): the hash value starts as the
// parent key and runs through the compression function once per 64 bytes
// of tokens; after each page's blocks it is that page's key. There is no
// padding and no initial value, so X1, X2 carry the state from block to
// block and page to page.
TEXT ·blockChainSHANI(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ prev+8(FP), AX
	MOVQ tokens+16(FP), SI
	MOVQ pages+24(FP), CX
	MOVQ blocks+32(FP), R12
	LEAQ ·shaK(SB), R8
	MOVOU ·shaBswap(SB), X8

	// X1, X2 = the parent key's words as A,B,E,F and C,D,G,H.
	MOVOU (AX), X3
	PSHUFB X8, X3 // H0 H1 H2 H3
	MOVOU 16(AX), X4
	PSHUFB X8, X4 // H4 H5 H6 H7
	MOVOU X4, X1
	SHUFPS $0x11, X3, X1 // F E B A
	MOVOU X4, X2
	SHUFPS $0xBB, X3, X2 // H G D C

bpage:
	MOVQ R12, BX

bblock:
	MOVOU X1, X9
	MOVOU X2, X10
	MOVOU (SI), X3
	PSHUFB X8, X3
	MOVOU 16(SI), X4
	PSHUFB X8, X4
	MOVOU 32(SI), X5
	PSHUFB X8, X5
	MOVOU 48(SI), X6
	PSHUFB X8, X6
	ADDQ $64, SI
	BLOCK
	PADDL X9, X1
	PADDL X10, X2
	DECQ BX
	JNZ bblock

	// The key: H0..H7 byte-swapped.
	MOVOU X1, X3
	SHUFPS $0xBB, X2, X3 // A B C D
	PSHUFB X8, X3
	MOVOU X3, (DI)
	MOVOU X1, X4
	SHUFPS $0x11, X2, X4 // E F G H
	PSHUFB X8, X4
	MOVOU X4, 16(DI)
	ADDQ $32, DI
	DECQ CX
	JNZ bpage
	RET
