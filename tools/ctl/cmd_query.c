/*
 * cmd_query.c - kvindexctl query (POST /query, or /query_by_hash with
 * --hashes) and kvindexctl routed (POST /routed): a prompt, as token ids
 * or as block hashes, and what the index holds of it.
 *
 * Token ids are a JSON array, read from --tokens-file or standard input,
 * and sent as they are: the API checks each id and names the one that is
 * wrong. Block hashes are decimal u64 (ctl_input.h), sent as decimal
 * strings, which the API takes as it takes numbers and which stay exact
 * past 2^63.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "ctl_cmd.h"
#include "ctl_input.h"
#include "ctl_print.h"

/* query_prompt adds the prompt to body: "token_ids" from --tokens-file
 * (standard input without it), or "block_hashes" from --hashes. Returns
 * an exit status, having said what is wrong. */
static int
query_prompt(const ctl_cmd *cmd, const ctl_args *a, json_t *body)
{
	if (a->tokens_file != NULL && a->hashes_file != NULL) {
		return ctl_usage(&cmd->flags,
				 "give --tokens-file or --hashes, not both");
	}
	const char *path = a->hashes_file ? a->hashes_file : a->tokens_file;
	const char *what = path != NULL ? path : "standard input";
	char *text;
	size_t len;
	int rc = ctl_read(path, &text, &len);
	if (rc != CTL_EXIT_OK) {
		return rc;
	}
	char err[256];
	if (a->hashes_file != NULL) {
		uint64_t *h;
		size_t n;
		if (ctl_hashes_parse(text, len, &h, &n, err, sizeof(err)) !=
		    KVI_OK) {
			rc = ctl_usage(&cmd->flags, "%s: %s", what, err);
		} else {
			json_t *arr = json_array();
			for (size_t i = 0; i < n; i++) {
				json_array_append_new(
				    arr, json_sprintf("%" PRIu64, h[i]));
			}
			json_object_set_new(body, "block_hashes", arr);
			kvi_free(h);
		}
	} else {
		json_error_t je;
		json_t *tok = json_loadb(text, len, 0, &je);
		if (!json_is_array(tok)) {
			rc = ctl_usage(&cmd->flags,
				       "%s: not a JSON array of token ids%s%s",
				       what, tok == NULL ? ": " : "",
				       tok == NULL ? je.text : "");
			json_decref(tok);
		} else {
			json_object_set_new(body, "token_ids", tok);
		}
	}
	kvi_free(text);
	return rc;
}

/* query_print prints the answer ans: what was asked and who answered,
 * then the ranked workers, best first. */
static void
query_print(const json_t *ans)
{
	const json_t *sh = json_object_get(ans, "shards");
	printf("%s: %lld blocks of %lld tokens; %lld of %lld shards answered",
	       ctl_str(ans, "model_name", "?"), ctl_int(ans, "query_blocks"),
	       ctl_int(ans, "block_size"), ctl_int(sh, "answered"),
	       ctl_int(sh, "total"));
	if (json_is_true(json_object_get(ans, "partial"))) {
		printf("; partial: a shard it needed did not answer");
	}
	if (json_is_true(json_object_get(ans, "stale"))) {
		printf("; stale: a shard that answered cannot commit");
	}
	putchar('\n');
	const json_t *ws = json_object_get(ans, "workers");
	if (json_array_size(ws) == 0) {
		printf("no rank holds a block of it\n");
		return;
	}
	static const char *const cols[] = {"POD", "RANK", "MATCHED", "GPU",
					   "CPU", "DISK", "PENDING"};
	ctl_table *t = ctl_table_alloc(cols, sizeof(cols) / sizeof(cols[0]));
	size_t i;
	json_t *w;
	json_array_foreach(ws, i, w)
	{
		ctl_table_row(t);
		ctl_table_cell(
		    t, "%s", ctl_str(w, "pod", ctl_str(w, "instance_id", "?")));
		ctl_table_cell(t, "%lld", ctl_int(w, "dp_rank"));
		ctl_table_cell(t, "%lld", ctl_int(w, "matched_tokens"));
		ctl_table_cell(t, "%lld", ctl_int(w, "gpu"));
		ctl_table_cell(t, "%lld", ctl_int(w, "cpu"));
		ctl_table_cell(t, "%lld", ctl_int(w, "disk"));
		ctl_table_cell(t, "%lld", ctl_int(w, "pending_tokens"));
	}
	ctl_table_print(t, stdout);
	ctl_table_free(t);
}

static int
query_run(ctl_http *h, const ctl_args *a)
{
	if (a->model == NULL) {
		return ctl_usage(&ctl_cmd_query.flags, "--model is required");
	}
	json_t *body = json_pack("{s:s}", "model_name", a->model);
	int rc = query_prompt(&ctl_cmd_query, a, body);
	if (rc != CTL_EXIT_OK) {
		json_decref(body);
		return rc;
	}
	if (a->top_k > 0) {
		json_object_set_new(body, "top_k", json_integer(a->top_k));
	}
	if (a->dp_rank >= 0) {
		json_object_set_new(body, "dp_rank", json_integer(a->dp_rank));
	}
	const char *path = a->hashes_file ? "/query_by_hash" : "/query";
	json_t *ans;
	rc = ctl_send(h, "POST", path, body, a->json, &ans, NULL);
	if (rc == CTL_EXIT_OK && ans != NULL) {
		query_print(ans);
	}
	json_decref(ans);
	return rc;
}

static const kvi_flag query_flag[] = {
    {"model", "M", "the model (required)", KVI_FLAG_STR(ctl_args, model)},
    {"tokens-file", "FILE",
     "the prompt's token ids, a JSON array; without it (or with -), "
     "standard input",
     KVI_FLAG_STR(ctl_args, tokens_file)},
    {"hashes", "FILE",
     "the prompt as its blocks' hashes instead (decimal u64, a JSON array "
     "or one a line), asked of /query_by_hash",
     KVI_FLAG_STR(ctl_args, hashes_file)},
    {"top-k", "K", "only the K best ranks",
     KVI_FLAG_INT(ctl_args, top_k, 1, 1048576),
     .def = "every rank with a match"},
    {"dp-rank", "R", "only this rank of each instance",
     CTL_FLAG_LONG(dp_rank, 0, 65535), .def = "every rank"},
    CTL_FLAG_JSON,
};

const ctl_cmd ctl_cmd_query = {
    .flags =
	{
	    .prog = "kvindexctl query",
	    .synopsis = "--model M [--tokens-file FILE | --hashes FILE] "
			"[--top-k K] [--dp-rank R] [--json]",
	    .summary = "The longest cached prefix of a prompt on each rank, "
		       "best first: its pod and rank, the tokens it matches, "
		       "on GPU, CPU and disk, and those pending there.",
	    CTL_FLAGS(query_flag),
	},
    .run = query_run,
};

static int
routed_run(ctl_http *h, const ctl_args *a)
{
	const kvi_flags *fl = &ctl_cmd_routed.flags;
	if (a->model == NULL || a->pod == NULL || a->dp_rank < 0) {
		return ctl_usage(fl, "--model, --pod and --dp-rank are "
				     "required");
	}
	json_t *body = json_pack("{s:s,s:s,s:I}", "model_name", a->model, "pod",
				 a->pod, "dp_rank", (json_int_t)a->dp_rank);
	int rc = query_prompt(&ctl_cmd_routed, a, body);
	if (rc != CTL_EXIT_OK) {
		json_decref(body);
		return rc;
	}
	json_t *ans;
	rc = ctl_send(h, "POST", "/routed", body, a->json, &ans, NULL);
	if (rc == CTL_EXIT_OK && ans != NULL) {
		printf("%s: %lld blocks held, %lld pending, %lld predicted\n",
		       ctl_str(ans, "listener", "?"),
		       ctl_int(ans, "matched_blocks"),
		       ctl_int(ans, "pending_blocks"),
		       ctl_int(ans, "predicted_blocks"));
	}
	json_decref(ans);
	return rc;
}

static const kvi_flag routed_flag[] = {
    {"model", "M", "the model (required)", KVI_FLAG_STR(ctl_args, model)},
    {"pod", "NS/POD", "the pod the request went to (required)",
     KVI_FLAG_STR(ctl_args, pod)},
    {"dp-rank", "R", "its rank (required)", CTL_FLAG_LONG(dp_rank, 0, 65535)},
    {"tokens-file", "FILE",
     "the prompt's token ids, a JSON array; without it (or with -), "
     "standard input",
     KVI_FLAG_STR(ctl_args, tokens_file)},
    {"hashes", "FILE", "the prompt as its blocks' hashes instead",
     KVI_FLAG_STR(ctl_args, hashes_file)},
    CTL_FLAG_JSON,
};

const ctl_cmd ctl_cmd_routed = {
    .flags =
	{
	    .prog = "kvindexctl routed",
	    .synopsis = "--model M --pod NS/POD --dp-rank R [--tokens-file "
			"FILE | --hashes FILE] [--json]",
	    .summary = "Says that a request was sent to a rank: the blocks of "
		       "its prompt that the rank does not hold become pending "
		       "there.",
	    CTL_FLAGS(routed_flag),
	},
    .run = routed_run,
};
