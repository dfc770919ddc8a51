/*
 * cmd_admin.c - kvindexctl's commands that change the shard set and
 * where listeners live: shards add (POST /admin/shards), shards drain
 * (DELETE /admin/shards/{id}), move (POST /admin/listeners/{key}/move)
 * and rebalance (POST /admin/rebalance, a dry run unless --apply).
 *
 * None of them moves a listener itself: the coordinator's next ticks do,
 * by hand-off, and kvindexctl moves shows them. Shard ids and listener
 * keys go into the path percent-encoded ("#" as %23, "/" as %2F).
 */
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "ctl_cmd.h"
#include "ctl_print.h"

static int
shards_add_run(ctl_http *h, const ctl_args *a)
{
	const char *arg = a->argv[0];
	const char *eq = strchr(arg, '=');
	if (eq == NULL || eq == arg || eq[1] == '\0') {
		return ctl_usage(&ctl_cmd_shards_add.flags, "%s is not ID=URL",
				 arg);
	}
	char *id = kvi_strndup(arg, (size_t)(eq - arg));
	json_t *body = json_pack("{s:s,s:s}", "id", id, "endpoint", eq + 1);
	kvi_free(id);
	json_t *ans;
	int rc =
	    ctl_send(h, "POST", "/admin/shards", body, a->json, &ans, NULL);
	if (rc == CTL_EXIT_OK && ans != NULL) {
		printf("%s %s (%s): listeners hashing now maps to it move "
		       "there\n",
		       ctl_str(ans, "status", "added"), ctl_str(ans, "id", "?"),
		       ctl_str(ans, "endpoint", "?"));
	}
	json_decref(ans);
	return rc;
}

static const kvi_flag json_only[] = {
    CTL_FLAG_JSON,
};

const ctl_cmd ctl_cmd_shards_add = {
    .flags =
	{
	    .prog = "kvindexctl shards add",
	    .synopsis = "[--json] ID=URL",
	    .summary = "Adds a shard (URL: its nng address, tcp://host:port "
		       "or ipc:///path): about 1/N of the listeners move to "
		       "it.",
	    CTL_FLAGS(json_only),
	},
    .nargs = 1,
    .token = true,
    .run = shards_add_run,
};

static int
shards_drain_run(ctl_http *h, const ctl_args *a)
{
	char *id = ctl_http_escape(a->argv[0]);
	char *path = kvi_malloc(strlen(id) + 32);
	sprintf(path, "/admin/shards/%s", id);
	json_t *ans;
	int rc = ctl_send(h, "DELETE", path, NULL, a->json, &ans, NULL);
	if (rc == CTL_EXIT_OK && ans != NULL) {
		printf("%s %s: its %lld listeners move to the other shards, "
		       "then it is forgotten\n",
		       ctl_str(ans, "status", "draining"),
		       ctl_str(ans, "id", "?"), ctl_int(ans, "listeners"));
	}
	json_decref(ans);
	kvi_free(path);
	kvi_free(id);
	return rc;
}

const ctl_cmd ctl_cmd_shards_drain = {
    .flags =
	{
	    .prog = "kvindexctl shards drain",
	    .synopsis = "[--json] ID",
	    .summary = "Drains a shard: its listeners move to the others, "
		       "then the coordinator forgets it.",
	    CTL_FLAGS(json_only),
	},
    .nargs = 1,
    .token = true,
    .run = shards_drain_run,
};

static int
move_run(ctl_http *h, const ctl_args *a)
{
	char *key = ctl_http_escape(a->argv[0]);
	char *path = kvi_malloc(strlen(key) + 32);
	sprintf(path, "/admin/listeners/%s/move", key);
	json_t *body = json_pack("{s:s}", "to", a->argv[1]);
	json_t *ans;
	int rc = ctl_send(h, "POST", path, body, a->json, &ans, NULL);
	if (rc == CTL_EXIT_OK && ans != NULL) {
		printf("moving %s from %s to %s (pinned there)\n",
		       ctl_str(ans, "listener", "?"),
		       ctl_str(ans, "from", "no shard"),
		       ctl_str(ans, "to", "?"));
	}
	json_decref(ans);
	kvi_free(path);
	kvi_free(key);
	return rc;
}

const ctl_cmd ctl_cmd_move = {
    .flags =
	{
	    .prog = "kvindexctl move",
	    .synopsis = "[--json] KEY SHARD",
	    .summary = "Pins a listener (KEY: ns/pod#rank, or "
		       "instance_id#rank) to a shard, whatever hashing says.",
	    CTL_FLAGS(json_only),
	},
    .nargs = 2,
    .token = true,
    .run = move_run,
};

static int
rebalance_run(ctl_http *h, const ctl_args *a)
{
	json_t *body = json_pack("{s:b}", "dry_run", !a->apply);
	json_t *ans;
	int rc =
	    ctl_send(h, "POST", "/admin/rebalance", body, a->json, &ans, NULL);
	if (rc != CTL_EXIT_OK || ans == NULL) {
		return rc;
	}
	const json_t *moves = json_object_get(ans, "moves");
	size_t n = json_array_size(moves);
	if (n == 0) {
		printf("every listener is on the shard hashing picks\n");
	} else if (json_is_true(json_object_get(ans, "dry_run"))) {
		printf("listeners off the shard hashing picks: %zu (a dry "
		       "run: --apply removes their pins)\n",
		       n);
	} else {
		printf("listeners unpinned: %zu; the next ticks move them "
		       "back\n",
		       n);
	}
	static const char *const cols[] = {"LISTENER", "FROM", "TO"};
	ctl_table *t = ctl_table_alloc(cols, 3);
	size_t i;
	json_t *m;
	json_array_foreach(moves, i, m)
	{
		ctl_table_row(t);
		ctl_table_cell(t, "%s", ctl_str(m, "listener", "?"));
		ctl_table_cell(t, "%s", ctl_str(m, "from", ""));
		ctl_table_cell(t, "%s", ctl_str(m, "to", ""));
	}
	if (n > 0) {
		ctl_table_print(t, stdout);
	}
	ctl_table_free(t);
	json_decref(ans);
	return rc;
}

static const kvi_flag rebalance_flag[] = {
    {"apply", NULL,
     "remove the pins of the listeners listed, so that they move back "
     "(without it, only list them)",
     KVI_FLAG_BOOL(ctl_args, apply)},
    CTL_FLAG_JSON,
};

const ctl_cmd ctl_cmd_rebalance = {
    .flags =
	{
	    .prog = "kvindexctl rebalance",
	    .synopsis = "[--apply] [--json]",
	    .summary = "Lists the listeners whose owner is not the shard "
		       "hashing picks (pinned, or a failover's); --apply "
		       "sends them back.",
	    CTL_FLAGS(rebalance_flag),
	},
    .token = true,
    .run = rebalance_run,
};
