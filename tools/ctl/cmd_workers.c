/*
 * cmd_workers.c - kvindexctl workers (GET /workers, every page) and
 * kvindexctl moves (GET /admin/moves).
 *
 * workers asks for the pages of --limit instances each, in instance id
 * order, until the API names no next cursor; --model and --pod are the
 * API's own filters, --state is kvindexctl's: the table shows the
 * listeners in that state, --json the instances (whole, as the API wrote
 * them) that have one.
 */
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "ctl_cmd.h"
#include "ctl_print.h"

static const char *const workers_states[] = {"pending", "active", "recovering",
					     "failed", "stale"};

/* workers_state_ok says whether s is a listener state of the API. */
static bool
workers_state_ok(const char *s)
{
	for (size_t i = 0; i < sizeof(workers_states) / sizeof(char *); i++) {
		if (strcmp(s, workers_states[i]) == 0) {
			return true;
		}
	}
	return false;
}

/* workers_has says whether instance w has a listener in state (NULL:
 * any). */
static bool
workers_has(const json_t *w, const char *state)
{
	const char *rank;
	json_t *l;
	json_object_foreach(json_object_get(w, "listeners"), rank, l)
	{
		if (state == NULL ||
		    strcmp(ctl_str(l, "status", ""), state) == 0) {
			return true;
		}
	}
	return false;
}

/* workers_row adds listener l, rank `rank` of instance w, to t. */
static void
workers_row(ctl_table *t, const json_t *w, const char *rank, const json_t *l)
{
	ctl_table_row(t);
	ctl_table_cell(t, "%s",
		       ctl_str(w, "name", ctl_str(w, "instance_id", "?")));
	ctl_table_cell(t, "%s", ctl_str(w, "model_name", ""));
	ctl_table_cell(t, "%s", rank);
	ctl_table_cell(t, "%s", ctl_str(l, "status", ""));
	const char *to = ctl_str(l, "moving_to", NULL);
	ctl_table_cell(t, "%s%s%s", ctl_str(l, "shard", ""), to ? "->" : "",
		       to ? to : "");
	ctl_table_cell(t, "%lld", ctl_int(l, "blocks"));
	long long batches = ctl_int(l, "queued_batches");
	long long bytes = ctl_int(l, "queued_bytes");
	char b[32];
	ctl_fmt_bytes(b, sizeof(b), (uint64_t)bytes);
	if (batches == 0 && bytes == 0) {
		ctl_table_cell(t, "0");
	} else {
		ctl_table_cell(t, "%lld/%s", batches, b);
	}
	const char *err = ctl_str(l, "last_error", NULL);
	const char *mis = ctl_str(l, "misconfigured", NULL);
	ctl_table_cell(t, "%s%s", err == NULL && mis ? "misconfigured: " : "",
		       err   ? err
		       : mis ? mis
			     : "");
}

static void
workers_print(const ctl_items *it, const char *state)
{
	static const char *const cols[] = {"POD",   "MODEL",     "RANK",
					   "STATE", "SHARD",     "BLOCKS",
					   "LAG",   "LAST_ERROR"};
	ctl_table *t = ctl_table_alloc(cols, sizeof(cols) / sizeof(cols[0]));
	for (size_t i = 0; i < it->n; i++) {
		const char *rank;
		json_t *l;
		json_object_foreach(json_object_get(it->val[i], "listeners"),
				    rank, l)
		{
			if (state == NULL ||
			    strcmp(ctl_str(l, "status", ""), state) == 0) {
				workers_row(t, it->val[i], rank, l);
			}
		}
	}
	ctl_table_print(t, stdout);
	ctl_table_free(t);
}

static int
workers_run(ctl_http *h, const ctl_args *a)
{
	if (a->state != NULL && !workers_state_ok(a->state)) {
		return ctl_usage(&ctl_cmd_workers.flags,
				 "--state: %s is not pending, active, "
				 "recovering, failed or stale",
				 a->state);
	}
	ctl_items it;
	int rc = ctl_workers_get(h, a->model, a->pod, a->limit, a->json, &it);
	if (rc == CTL_EXIT_OK && a->json) {
		bool *keep = kvi_calloc(it.n + 1, sizeof(bool));
		for (size_t i = 0; i < it.n; i++) {
			keep[i] = workers_has(it.val[i], a->state);
		}
		char *text = ctl_items_join(&it, keep);
		puts(text);
		kvi_free(text);
		kvi_free(keep);
	} else if (rc == CTL_EXIT_OK) {
		workers_print(&it, a->state);
	}
	ctl_items_fini(&it);
	return rc;
}

static const kvi_flag workers_flag[] = {
    {"model", "M", "only the instances of this model (the API's model_name)",
     KVI_FLAG_STR(ctl_args, model)},
    {"pod", "NS/POD", "only this pod (the API's name)",
     KVI_FLAG_STR(ctl_args, pod)},
    {"state", "S",
     "only the listeners in this state: pending, active, recovering, "
     "failed or stale; with --json, the instances that have one",
     KVI_FLAG_STR(ctl_args, state)},
    {"limit", "N",
     "instances a page (the API's limit); every page is read, in "
     "instance id order",
     KVI_FLAG_INT(ctl_args, limit, 1, 100000)},
    {"json", NULL,
     "print one JSON array: the entries of every page, each as the API "
     "wrote it",
     KVI_FLAG_BOOL(ctl_args, json)},
};

const ctl_cmd ctl_cmd_workers = {
    .flags =
	{
	    .prog = "kvindexctl workers",
	    .synopsis = "[--model M] [--pod NS/POD] [--state S] [--limit N] "
			"[--json]",
	    .summary = "The registered pods and each of their listeners: "
		       "its state, its shard, its blocks, its lag (batches "
		       "and bytes queued) and its last error.",
	    CTL_FLAGS(workers_flag),
	},
    .run = workers_run,
};

static int
moves_run(ctl_http *h, const ctl_args *a)
{
	json_t *ans;
	int rc = ctl_send(h, "GET", "/admin/moves", NULL, a->json, &ans, NULL);
	if (rc != CTL_EXIT_OK || ans == NULL) {
		return rc;
	}
	static const char *const cols[] = {
	    "LISTENER", "FROM", "TO", "PHASE", "BLOCKS", "DONE", "HANDOFF"};
	ctl_table *t = ctl_table_alloc(cols, sizeof(cols) / sizeof(cols[0]));
	size_t i;
	json_t *m;
	json_array_foreach(ans, i, m)
	{
		json_t *done = json_object_get(m, "done_ms_ago");
		json_t *handoff = json_object_get(m, "handoff");
		json_t *blocks = json_object_get(m, "blocks");
		char ago[32] = "";
		if (done != NULL) {
			ctl_fmt_ms(ago, sizeof(ago), done);
		}
		ctl_table_row(t);
		ctl_table_cell(t, "%s", ctl_str(m, "listener", "?"));
		ctl_table_cell(t, "%s", ctl_str(m, "from", ""));
		ctl_table_cell(t, "%s", ctl_str(m, "to", ""));
		ctl_table_cell(t, "%s", ctl_str(m, "phase", ""));
		if (blocks != NULL) {
			ctl_table_cell(t, "%lld", json_integer_value(blocks));
		} else {
			ctl_table_cell(t, "%s", "");
		}
		ctl_table_cell(t, "%s", ago);
		ctl_table_cell(t, "%s",
			       handoff == NULL         ? ""
			       : json_is_true(handoff) ? "yes"
						       : "no");
	}
	ctl_table_print(t, stdout);
	ctl_table_free(t);
	json_decref(ans);
	return CTL_EXIT_OK;
}

static const kvi_flag moves_flag[] = {
    CTL_FLAG_JSON,
};

const ctl_cmd ctl_cmd_moves = {
    .flags =
	{
	    .prog = "kvindexctl moves",
	    .synopsis = "[--json]",
	    .summary = "The hand-offs in flight, then the last ones done, "
		       "newest first, with their phase.",
	    CTL_FLAGS(moves_flag),
	},
    .token = true,
    .run = moves_run,
};
