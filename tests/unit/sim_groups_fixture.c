/*
 * sim_groups_fixture.c - the shared part of the KV cache groups' unit
 * tests (sim_groups_fixture.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "alloc.h"
#include "sim_groups_fixture.h"

void
gfx_setup(gfx *f, const char *spec)
{
	sim_groups_config cfg;
	const char *why = sim_groups_parse(spec, strlen(spec), BS, 16, &cfg);
	if (why != NULL) {
		fail_msg("%s: %s", spec, why);
	}
	cfg.salt = SALT;
	f->g = sim_groups_alloc(&cfg);
	sim_batch_init(&f->batch, BS);
}

void
gfx_fini(gfx *f)
{
	sim_groups_free(f->g);
	sim_batch_fini(&f->batch);
}

/* ramp writes n tokens base, base + 1, ... */
void
ramp(uint32_t *tok, size_t n, uint32_t base)
{
	for (size_t i = 0; i < n; i++) {
		tok[i] = base + (uint32_t)i;
	}
}

/* run runs a prompt of n tokens in a fresh batch. */
void
run(gfx *f, const uint32_t *tok, uint64_t n)
{
	sim_batch_reset(&f->batch);
	sim_groups_run(f->g, &f->batch, tok, n, NULL, &f->res);
}

/* query returns the hit a prompt would take now, each group's in gh. */
uint64_t
query(gfx *f, const uint32_t *tok, uint64_t n, uint64_t *gh)
{
	sim_batch scratch;
	sim_batch_init(&scratch, BS);
	uint64_t hit, ignored[SIM_MAX_GROUPS];
	sim_groups_query(f->g, &scratch, tok, n, NULL, &hit,
			 gh != NULL ? gh : ignored);
	sim_batch_fini(&scratch);
	return hit;
}

/* hashes_of writes the external hashes of a prompt's n full blocks. */
void
hashes_of(const uint32_t *tok, uint32_t n, uint64_t *out)
{
	for (uint32_t i = 0; i < n; i++) {
		out[i] = sim_external_hash(SALT, i > 0, i > 0 ? out[i - 1] : 0,
					   tok + (size_t)i * BS, BS);
	}
}

/* held says whether group gi holds the hash, from the ground truth. */
bool
held(const gfx *f, size_t gi, uint64_t hash)
{
	size_t n;
	sim_block_info *b = sim_groups_snapshot(f->g, &n);
	bool yes = false;
	for (size_t i = 0; i < n; i++) {
		yes |= b[i].hash == hash && (b[i].groups & (1u << gi));
	}
	kvi_free(b);
	return yes;
}

/* event k of the batch, of a type and group. */
const sim_event *
event(const gfx *f, uint32_t k, sim_event_type type, uint32_t gi)
{
	assert_true(k < f->batch.n_events);
	const sim_event *ev = &f->batch.events[k];
	assert_int_equal(ev->type, type);
	assert_true(ev->grouped);
	assert_int_equal(ev->group, gi);
	return ev;
}

/* stored_hash returns block j of a stored event (its last hash block). */
uint64_t
stored_hash(const gfx *f, const sim_event *ev, uint32_t j)
{
	uint32_t stride = ev->stride > 1 ? ev->stride : 1;
	return f->batch.ext[ev->first + (j + 1) * stride - 1];
}
