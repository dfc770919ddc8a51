/*
 * cmd_register.c - kvindexctl register (POST /register, the per-pod form
 * from flags, or any body from a file) and kvindexctl unregister (POST
 * /unregister, by pod name or by instance id).
 *
 * A body from --file is sent as it is: the API checks it and says what is
 * wrong, and an instance id past 2^63 in it stays exact. A registration
 * kept but not yet assigned (202, a shard down) is a success: the
 * coordinator retries by itself, and kvindexctl says so.
 */
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "ctl_cmd.h"
#include "ctl_print.h"

/* register_set adds key: v to body when v was given (>= lo). */
static void
register_set(json_t *body, const char *key, long v, long lo)
{
	if (v >= lo) {
		json_object_set_new(body, key, json_integer(v));
	}
}

/* register_body builds the per-pod body from the flags into *out, or
 * says what is missing. */
static int
register_body(const ctl_args *a, json_t **out)
{
	const kvi_flags *fl = &ctl_cmd_register.flags;
	if (a->name == NULL || a->ip == NULL || a->model == NULL ||
	    a->block_size == 0) {
		return ctl_usage(fl, "--name, --ip, --model and --block-size "
				     "are required, or --file");
	}
	json_t *b = json_pack("{s:s,s:s,s:s,s:I}", "name", a->name, "ip", a->ip,
			      "model_name", a->model, "block_size",
			      (json_int_t)a->block_size);
	register_set(b, "zmq_port", a->zmq_port, 1);
	register_set(b, "dp_size", a->dp_size, 1);
	register_set(b, "dp_start_rank", a->dp_start_rank, 0);
	register_set(b, "replay_port", a->replay_port, 1);
	register_set(b, "recover_port", a->recover_port, 1);
	register_set(b, "metrics_port", a->metrics_port, 1);
	*out = b;
	return CTL_EXIT_OK;
}

/* register_print says what the coordinator did with the registration. */
static void
register_print(const json_t *ans)
{
	const char *name = ctl_str(ans, "name", NULL);
	const char *status = ctl_str(ans, "status", "?");
	printf("%s %s%s(instance %s):", status, name ? name : "",
	       name ? " " : "", ctl_str(ans, "instance_id", "?"));
	size_t i;
	json_t *l;
	json_array_foreach(json_object_get(ans, "listeners"), i, l)
	{
		printf(" %s", json_string_value(l));
	}
	if (json_is_true(json_object_get(ans, "existed"))) {
		printf(" (registered already)");
	}
	putchar('\n');
	if (strcmp(status, "pending") == 0) {
		printf("not assigned yet: %s; the coordinator retries in "
		       "%lld ms\n",
		       ctl_str(ans, "error", "?"), ctl_int(ans, "retry_in_ms"));
	}
}

static int
register_run(ctl_http *h, const ctl_args *a)
{
	bool pod_flags = a->name || a->ip || a->model || a->block_size ||
			 a->zmq_port || a->dp_size || a->dp_start_rank >= 0 ||
			 a->replay_port || a->recover_port || a->metrics_port;
	if (a->file != NULL && pod_flags) {
		return ctl_usage(&ctl_cmd_register.flags,
				 "give --file or the pod's flags, not both");
	}
	char *text = NULL;
	size_t len;
	json_t *body = NULL;
	int rc = a->file != NULL ? ctl_read(a->file, &text, &len)
				 : register_body(a, &body);
	if (rc != CTL_EXIT_OK) {
		return rc;
	}
	if (body != NULL) {
		text = json_dumps(body, JSON_COMPACT);
		json_decref(body);
	}
	json_t *ans;
	rc = ctl_send_text(h, "POST", "/register", text, a->json, &ans, NULL);
	free(text); /* kvi_free and jansson's free alike */
	if (rc == CTL_EXIT_OK && ans != NULL) {
		register_print(ans);
	}
	json_decref(ans);
	return rc;
}

static const kvi_flag register_flag[] = {
    {"name", "NS/POD", "the pod", KVI_FLAG_STR(ctl_args, name)},
    {"ip", "IP", "its address", KVI_FLAG_STR(ctl_args, ip)},
    {"model", "M", "its model", KVI_FLAG_STR(ctl_args, model)},
    {"block-size", "N", "tokens per block",
     KVI_FLAG_INT(ctl_args, block_size, 1, 1048576)},
    {"dp-size", "N", "ranks the pod hosts",
     KVI_FLAG_INT(ctl_args, dp_size, 1, 65536), .def = "the coordinator's"},
    {"dp-start-rank", "S", "the global rank of its first rank",
     CTL_FLAG_LONG(dp_start_rank, 0, 65535), .def = "0"},
    {"zmq-port", "P", "rank r's event socket is tcp://IP:P+r",
     KVI_FLAG_INT(ctl_args, zmq_port, 1, 65535)},
    {"replay-port", "P", "rank r replays on tcp://IP:P+r",
     KVI_FLAG_INT(ctl_args, replay_port, 1, 65535), .def = "none"},
    {"recover-port", "P", "rank r answers /kv_recover on http://IP:P+r",
     KVI_FLAG_INT(ctl_args, recover_port, 1, 65535), .def = "none"},
    {"metrics-port", "P", "the engine's Prometheus port, one a pod",
     KVI_FLAG_INT(ctl_args, metrics_port, 1, 65535), .def = "none"},
    {"file", "FILE",
     "send this JSON body instead, as it is (either form; - for standard "
     "input)",
     KVI_FLAG_STR(ctl_args, file)},
    CTL_FLAG_JSON,
};

const ctl_cmd ctl_cmd_register = {
    .flags =
	{
	    .prog = "kvindexctl register",
	    .synopsis = "--name NS/POD --ip IP --model M --block-size N "
			"[--dp-size N] [--dp-start-rank S] [--zmq-port P] "
			"[--replay-port P] [--recover-port P] "
			"[--metrics-port P] [--json] | --file FILE [--json]",
	    .summary = "Registers a pod, all its ranks at once, or what a "
		       "file's body says.",
	    CTL_FLAGS(register_flag),
	},
    .token = true,
    .run = register_run,
};

static int
unregister_run(ctl_http *h, const ctl_args *a)
{
	const kvi_flags *fl = &ctl_cmd_unregister.flags;
	json_t *body;
	if (a->name != NULL && a->instance_id == NULL && a->model == NULL &&
	    a->dp_rank < 0) {
		body = json_pack("{s:s}", "name", a->name);
	} else if (a->name == NULL && a->instance_id != NULL &&
		   a->model != NULL) {
		body = json_pack("{s:s,s:s}", "instance_id", a->instance_id,
				 "model_name", a->model);
		register_set(body, "dp_rank", a->dp_rank, 0);
	} else {
		return ctl_usage(fl, "give --name, or --instance-id and "
				     "--model (and --dp-rank)");
	}
	json_t *ans;
	int rc = ctl_send(h, "POST", "/unregister", body, a->json, &ans, NULL);
	if (rc == CTL_EXIT_OK && ans != NULL) {
		printf("unregistered");
		size_t i;
		json_t *l;
		json_array_foreach(json_object_get(ans, "unregistered"), i, l)
		{
			printf(" %s", json_string_value(l));
		}
		putchar('\n');
	}
	json_decref(ans);
	return rc;
}

static const kvi_flag unregister_flag[] = {
    {"name", "NS/POD", "a pod registered by name: all its ranks",
     KVI_FLAG_STR(ctl_args, name)},
    {"instance-id", "ID", "an instance registered rank by rank",
     KVI_FLAG_STR(ctl_args, instance_id)},
    {"model", "M", "the instance's model", KVI_FLAG_STR(ctl_args, model)},
    {"dp-rank", "R", "only this rank of the instance",
     CTL_FLAG_LONG(dp_rank, 0, 65535), .def = "all"},
    CTL_FLAG_JSON,
};

const ctl_cmd ctl_cmd_unregister = {
    .flags =
	{
	    .prog = "kvindexctl unregister",
	    .synopsis = "(--name NS/POD | --instance-id ID --model M "
			"[--dp-rank R]) [--json]",
	    .summary = "Removes a pod, an instance or one of its ranks, "
		       "registered over HTTP.",
	    CTL_FLAGS(unregister_flag),
	},
    .token = true,
    .run = unregister_run,
};
