/*
 * options.h - the coordinator's command line: every flag of
 * kvindex-coordinator, its default and its bounds, in one table
 * (common/cli.h), and the options it fills.
 */
#ifndef KVI_COORDINATOR_OPTIONS_H
#define KVI_COORDINATOR_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

#include "assigner.h"
#include "cli.h"
#include "kube_watch.h"
#include "ladder.h"
#include "lease.h"
#include "log.h"
#include "query.h"

#define KVC_OPTS_MAX_SHARDS 256
#define KVC_OPTS_MAX_NS     64

typedef struct kvc_opts {
	const char *http;
	int http_threads;
	int max_conns; /* 0: half the open-file limit */
	char *shard_ids[KVC_OPTS_MAX_SHARDS], *shard_urls[KVC_OPTS_MAX_SHARDS];
	size_t n_shards;
	const char *discovery_file;
	uint32_t dp_size;
	uint32_t max_dp_size;
	const char *data_dir;
	const char *admin_token_file;
	const char *register_token_file;
	const char *rpc_secret_file;
	const char *log_file;
	kvi_log_level log_level;
	size_t max_body;
	kvc_query_config query;
	int query_batch, query_inflight; /* coalescing per shard (qbatch.h) */
	kvc_assigner_config assign;
	char *namespaces[KVC_OPTS_MAX_NS];
	kvc_kube_config kube;
	const char *lease;    /* NAMESPACE/NAME; NULL: no leader election */
	const char *identity; /* NULL: the host name */
	const char *advertise;
	kvc_lease_config le;
	kvc_ladder_config ladder;
	int ladder_gap_pct;
} kvc_opts;

/* The flag table (common/cli.h), for --help and usage messages. */
extern const kvi_flags kvc_opts_flags;

/* kvc_opts_parse fills o from the command line as kvi_flags_parse does
 * (0, 1 after --help, -1), and requires a shard. */
int kvc_opts_parse(int argc, char **argv, kvc_opts *o);

/* kvc_opts_fini frees the shards and namespaces the flags made, also
 * after a parse that failed half-way. */
void kvc_opts_fini(kvc_opts *o);

#endif /* KVI_COORDINATOR_OPTIONS_H */
