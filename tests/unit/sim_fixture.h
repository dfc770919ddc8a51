/*
 * sim_fixture.h - what the simulator's cache and encoding tests share: a
 * cache of a few blocks of BS tokens (salt 7) and a batch to run
 * requests into.
 */
#ifndef KVI_TESTS_SIM_FIXTURE_H
#define KVI_TESTS_SIM_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>

#include "sim_cache.h"

#define BS 4

typedef struct fixture {
	sim_cache *cache;
	sim_batch batch;
	sim_request_result res;
} fixture;

/* fx_setup makes f a cache of gpu (and cpu) blocks, offloading its CPU
 * stores when offload. */
static inline void
fx_setup(fixture *f, uint32_t gpu, uint32_t cpu, bool offload)
{
	sim_cache_config cfg = {.gpu_blocks = gpu,
				.cpu_blocks = cpu,
				.block_size = BS,
				.salt = 7,
				.offload = offload};
	f->cache = sim_cache_alloc(&cfg);
	sim_batch_init(&f->batch, BS);
}

static inline void
fx_fini(fixture *f)
{
	sim_cache_free(f->cache);
	sim_batch_fini(&f->batch);
}

#endif /* KVI_TESTS_SIM_FIXTURE_H */
