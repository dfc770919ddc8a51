/*
 * sim_config.h - command-line flags of kvindex-sim.
 *
 * sim_config_parse fills a sim_config from argv and validates it; it does no
 * I/O besides reading argv (the usage text is printed by the caller). Every
 * flag is described by sim_config_usage, which is what --help prints.
 */
#ifndef KVI_SIM_CONFIG_H
#define KVI_SIM_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "error.h"
#include "log.h"
#include "sim_encode.h"
#include "sim_engine.h"
#include "sim_groups.h"
#include "wire_encode.h"

#define SIM_MAX_FLAVOURS 64

/* A port flag: a fixed base, 0 for an automatic range, or off. */
typedef struct sim_port_flag {
	int base;
	bool off;
} sim_port_flag;

typedef struct sim_config {
	/* layout */
	uint32_t pods;
	uint32_t dp;
	const char *model;
	uint32_t block_size;
	const char *ip;
	sim_port_flag zmq_port;
	sim_port_flag replay_port;
	sim_port_flag recover_port;
	sim_port_flag metrics_port; /* per pod; off by default */
	char *control_host;         /* owned */
	int control_port;
	const char *layout_file;
	/* ranks */
	uint32_t cache_blocks;
	uint32_t cpu_blocks;
	bool offload;
	bool offload_bs0;
	/* --flavours: pod p is flavours[p % n_flavours]; none: the default */
	sim_flavour flavours[SIM_MAX_FLAVOURS];
	uint32_t n_flavours;
	/* --kv-groups: pod p's KV cache groups are groups[p % n_groups];
	 * none: the default cache (one full-attention group) */
	const char *kv_groups;
	sim_groups_config *groups; /* owned */
	uint32_t n_groups;
	size_t replay_buffer;
	bool replay_topic;
	size_t recover_log;
	kvi_event_form form;
	kvi_hash_form hash_form;
	bool with_rank;
	/* the pods are one data-parallel group: rank r of pod p publishes
	 * as global rank p * dp + r (--dp-group) */
	bool dp_group;
	const char *topic;
	uint64_t hash_salt;
	uint32_t sub_delay_ms; /* --sub-delay-ms (sim_latesub.h); 0: off */
	/* load */
	const char *trace;
	uint32_t blocks_per_id;
	uint32_t copies;
	uint32_t generate;
	uint32_t salts;
	uint32_t loras;
	uint32_t mm_every;
	double rate;
	uint64_t requests;
	bool loop;
	sim_route route;
	uint64_t seed;
	uint32_t requests_per_batch;
	bool paused;
	/* time */
	double prefill_rate; /* tokens/s per rank; 0: instant */
	uint64_t prefill_chunk;
	uint32_t max_queue;
	/* process */
	const char *log_file;
	kvi_log_level log_level;
} sim_config;

/* sim_config_parse parses argv into *cfg (which it initialises). Sets *help
 * when --help was given. Returns KVI_EINVAL with a message in err (errlen
 * bytes) for a bad flag or value. Strings point into argv. */
kvi_err sim_config_parse(int argc, char **argv, sim_config *cfg, bool *help,
			 char *err, size_t errlen);
void sim_config_fini(sim_config *cfg);
void sim_config_usage(FILE *f);

#endif /* KVI_SIM_CONFIG_H */
