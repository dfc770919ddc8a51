/*
 * cmd_status.c - kvindexctl status: who leads (GET /leader), and each
 * shard as the coordinator sees it (GET /admin/shards: up, down or
 * draining, the listeners and blocks it reported, its store, when it was
 * last heard), with its listeners by state and their lag summed from
 * GET /workers (each listener's shard, status and queue). Listeners
 * that no shard owns make a row of their own.
 *
 * The coordinator's API gives no figure of descriptors: a shard's open
 * descriptors are on its own /metrics (kvindex_shard_open_files).
 */
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "ctl_cmd.h"
#include "ctl_print.h"

/* The listener states of docs/api.md (GET /workers), in that order. */
static const char *const status_states[] = {"active", "pending", "recovering",
					    "stale", "failed"};
#define N_STATES (sizeof(status_states) / sizeof(status_states[0]))

/* What /workers says of the listeners of one shard. */
typedef struct shard_sum {
	const char *id;                   /* NULL: the listeners of no shard */
	long long by_state[N_STATES + 1]; /* the last: another state */
	long long queued_batches, queued_bytes;
} shard_sum;

/* status_sum adds listener l to the sums of its shard, one of sums[0..n)
 * (sums[0] is no shard's). */
static void
status_sum(shard_sum *sums, size_t n, const json_t *l)
{
	const char *shard = ctl_str(l, "shard", NULL);
	shard_sum *s = &sums[0];
	for (size_t i = 1; shard != NULL && i < n; i++) {
		if (strcmp(sums[i].id, shard) == 0) {
			s = &sums[i];
		}
	}
	const char *st = ctl_str(l, "status", "");
	size_t k = 0;
	while (k < N_STATES && strcmp(status_states[k], st) != 0) {
		k++;
	}
	s->by_state[k]++;
	s->queued_batches += ctl_int(l, "queued_batches");
	s->queued_bytes += ctl_int(l, "queued_bytes");
}

/* status_cells fills the STATES and LAG cells of a row from s. */
static void
status_cells(ctl_table *t, const shard_sum *s)
{
	char states[256] = "";
	size_t used = 0;
	for (size_t k = 0; k <= N_STATES; k++) {
		if (s->by_state[k] > 0 && used < sizeof(states)) {
			used += (size_t)snprintf(
			    states + used, sizeof(states) - used, "%s%s=%lld",
			    used ? "," : "",
			    k < N_STATES ? status_states[k] : "other",
			    s->by_state[k]);
		}
	}
	ctl_table_cell(t, "%s", states);
	char bytes[32];
	ctl_fmt_bytes(bytes, sizeof(bytes), (uint64_t)s->queued_bytes);
	if (s->queued_batches == 0 && s->queued_bytes == 0) {
		ctl_table_cell(t, "0");
	} else {
		ctl_table_cell(t, "%lld/%s", s->queued_batches, bytes);
	}
}

static void
status_shard_row(ctl_table *t, const json_t *sh, const shard_sum *s)
{
	char size[32], heard[32];
	ctl_fmt_bytes(size, sizeof(size), (uint64_t)ctl_int(sh, "store_bytes"));
	ctl_fmt_ms(heard, sizeof(heard),
		   json_object_get(sh, "last_heard_ms_ago"));
	ctl_table_row(t);
	ctl_table_cell(t, "%s", ctl_str(sh, "id", "?"));
	ctl_table_cell(t, "%s", ctl_str(sh, "status", "?"));
	ctl_table_cell(t, "%lld", ctl_int(sh, "listeners"));
	status_cells(t, s);
	ctl_table_cell(t, "%lld", ctl_int(sh, "blocks"));
	ctl_table_cell(t, "%s",
		       json_is_string(json_object_get(sh, "store_error"))
			   ? "failing"
			   : "ok");
	ctl_table_cell(t, "%s", size);
	ctl_table_cell(t, "%s", heard);
	ctl_table_cell(t, "%s", ctl_str(sh, "endpoint", ""));
}

/* status_print prints the leader and the table of shards. */
static void
status_print(ctl_http *h, const json_t *leader, const json_t *shards,
	     const ctl_items *it)
{
	printf("coordinator  %s  %s, %s\n", ctl_http_base(h),
	       ctl_str(leader, "identity", "?"),
	       json_is_true(json_object_get(leader, "is_leader"))
		   ? "the leader"
		   : "a follower");
	printf("leader       %s  %s  epoch %lld\n\n",
	       ctl_str(leader, "leader", "none"),
	       ctl_str(leader, "leader_url", "-"), ctl_int(leader, "epoch"));
	size_t n = json_array_size(shards) + 1;
	shard_sum *sums = kvi_calloc(n, sizeof(*sums));
	for (size_t i = 1; i < n; i++) {
		sums[i].id = ctl_str(json_array_get(shards, i - 1), "id", "");
	}
	for (size_t i = 0; i < it->n; i++) {
		const char *rank;
		json_t *l;
		json_object_foreach(json_object_get(it->val[i], "listeners"),
				    rank, l)
		{
			status_sum(sums, n, l);
		}
	}
	static const char *const cols[] = {
	    "SHARD",  "STATUS", "LISTENERS",  "STATES", "LAG",
	    "BLOCKS", "STORE",  "STORE_SIZE", "HEARD",  "ENDPOINT"};
	ctl_table *t = ctl_table_alloc(cols, sizeof(cols) / sizeof(cols[0]));
	for (size_t i = 1; i < n; i++) {
		status_shard_row(t, json_array_get(shards, i - 1), &sums[i]);
	}
	long long unowned = 0;
	for (size_t k = 0; k <= N_STATES; k++) {
		unowned += sums[0].by_state[k];
	}
	if (unowned > 0) {
		ctl_table_row(t);
		ctl_table_cell(t, "-");
		ctl_table_cell(t, "unassigned");
		ctl_table_cell(t, "%lld", unowned);
		status_cells(t, &sums[0]);
	}
	ctl_table_print(t, stdout);
	ctl_table_free(t);
	for (size_t i = 1; i < n; i++) {
		const json_t *sh = json_array_get(shards, i - 1);
		const char *err = ctl_str(sh, "store_error", NULL);
		if (err != NULL) {
			printf("%s store: %s\n", sums[i].id, err);
		}
	}
	kvi_free(sums);
}

/* status_get sends GET path, keeping the answer in *r and *ans. */
static int
status_get(ctl_http *h, const ctl_args *a, const char *path, json_t **ans,
	   ctl_resp *r)
{
	int rc = ctl_send(h, "GET", path, NULL, false, ans, r);
	if (rc == CTL_EXIT_ANSWER && a->json) {
		ctl_print_raw(r->body, r->len);
	}
	return rc;
}

static int
status_run(ctl_http *h, const ctl_args *a)
{
	json_t *leader = NULL, *shards = NULL;
	ctl_resp lr = {0}, sr = {0};
	ctl_items it = {0};
	int rc = status_get(h, a, "/leader", &leader, &lr);
	if (rc == CTL_EXIT_OK) {
		rc = status_get(h, a, "/admin/shards", &shards, &sr);
	}
	if (rc == CTL_EXIT_OK) {
		rc = ctl_workers_get(h, NULL, NULL, ctl_args_defaults.limit,
				     a->json, &it);
	}
	if (rc == CTL_EXIT_OK && a->json) {
		char *workers = ctl_items_join(&it, NULL);
		printf("{\"leader\":%s,\"shards\":%s,\"workers\":%s}\n",
		       lr.body, sr.body, workers);
		kvi_free(workers);
	} else if (rc == CTL_EXIT_OK) {
		status_print(h, leader, shards, &it);
	}
	json_decref(leader);
	json_decref(shards);
	ctl_resp_fini(&lr);
	ctl_resp_fini(&sr);
	ctl_items_fini(&it);
	return rc;
}

static const kvi_flag status_flag[] = {
    {"json", NULL,
     "print {\"leader\", \"shards\", \"workers\"}: the answers of GET "
     "/leader and GET /admin/shards as they came, and the entries of GET "
     "/workers' pages in one array",
     KVI_FLAG_BOOL(ctl_args, json)},
};

const ctl_cmd ctl_cmd_status = {
    .flags =
	{
	    .prog = "kvindexctl status",
	    .synopsis = "[--json]",
	    .summary = "Who leads, and each shard: up or down, its listeners "
		       "by state, their lag, its blocks and its store.",
	    CTL_FLAGS(status_flag),
	},
    .token = true,
    .run = status_run,
};
