/*
 * recovery_stubs.h - the stubs test_recovery.c drives recovery against
 * (recovery_stubs.c), and what they recorded.
 */
#ifndef KVI_TESTS_RECOVERY_STUBS_H
#define KVI_TESTS_RECOVERY_STUBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "recovery.h"

/* What recovery asked of the stubs; zeroed by each test's setup. */
typedef struct recovery_stubs {
	uint64_t applied[64];
	int n_applied;
	uint64_t lose_seq; /* kva_batch reports this one lost */
	int clears;
	int timer_ms; /* the last kvg_io_timer: < 0 disarmed */
	int replays;  /* kvg_io_replay_start calls */
	uint64_t replay_from;
	bool replay_open;
	kvi_err replay_rv;
	int fetches;
	char url[512];
	uint64_t max_blocks; /* of the last fetch */
	size_t entries;      /* what kvx_listener_entries says */
	int cancels;
	int asks; /* kvg_handoff_ask */
	kvr_response resp;
	kvl_listener *l;
	int warnings; /* kvl_warn calls */
} recovery_stubs;

extern recovery_stubs st;

/* recovery_stubs_owner returns the ingest's side of kvq_owner, stubbed. */
kvq_owner recovery_stubs_owner(void);

#endif /* KVI_TESTS_RECOVERY_STUBS_H */
