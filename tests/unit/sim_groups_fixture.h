/*
 * sim_groups_fixture.h - what the unit tests of the simulator's KV cache
 * groups share: a groups object with its batch, prompts, and the ground
 * truth and events read back (test_sim_groups.c, test_sim_groups_wire.c).
 *
 * Hash blocks are BS = 4 tokens; a prompt of 6 blocks and one token
 * (25 tokens) may hit its 6 blocks.
 */
#ifndef KVI_TESTS_SIM_GROUPS_FIXTURE_H
#define KVI_TESTS_SIM_GROUPS_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sim_groups.h"
#include "sim_kv.h"

#define BS   4
#define SALT 7

typedef struct gfx {
	sim_groups *g;
	sim_batch batch;
	sim_request_result res;
} gfx;

/* gfx_setup makes f's groups from a --kv-groups spec (failing the test
 * on a bad one); gfx_fini frees them. */
void gfx_setup(gfx *f, const char *spec);
void gfx_fini(gfx *f);

/* ramp writes n tokens base, base + 1, ... */
void ramp(uint32_t *tok, size_t n, uint32_t base);

/* run runs a prompt of n tokens in a fresh batch. */
void run(gfx *f, const uint32_t *tok, uint64_t n);

/* query returns the hit a prompt would take now, each group's in gh
 * (may be NULL). */
uint64_t query(gfx *f, const uint32_t *tok, uint64_t n, uint64_t *gh);

/* hashes_of writes the external hashes of a prompt's n full blocks. */
void hashes_of(const uint32_t *tok, uint32_t n, uint64_t *out);

/* held says whether group gi holds the hash, from the ground truth. */
bool held(const gfx *f, size_t gi, uint64_t hash);

/* event returns event k of the batch, checking its type and group. */
const sim_event *event(const gfx *f, uint32_t k, sim_event_type type,
		       uint32_t gi);

/* stored_hash returns block j of a stored event (its last hash block). */
uint64_t stored_hash(const gfx *f, const sim_event *ev, uint32_t j);

#endif /* KVI_TESTS_SIM_GROUPS_FIXTURE_H */
