/*
 * engine_args.c - the engine's flags read from its container's words
 * (engine_args.h says which, and the engines' sources they follow).
 */
#include "engine_args.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "engine_args_int.h"

#define EA_RANKS 65536u /* a rank is a u16 */

/* The flags read, by what they set. */
typedef enum ea_flag {
	F_DP,     /* data-parallel size */
	F_DPL,    /* vLLM: ranks on this node */
	F_DPR,    /* vLLM: this node's first rank */
	F_DPN,    /* vLLM: this engine's one rank (external load balancing) */
	F_DPB,    /* vLLM: the data-parallel backend */
	F_BLOCK,  /* tokens per block (SGLang: per page) */
	F_KVEV,   /* the KV events' configuration, JSON */
	F_NNODES, /* SGLang: nodes the engine spans */
	F_CONFIG, /* a file of more arguments */
	F_COUNT,
} ea_flag;

typedef struct ea_name {
	const char *name;
	ea_flag f;
} ea_name;

/* vllm/engine/arg_utils.py, EngineArgs.add_cli_args */
static const ea_name vllm_names[] = {
    {"--data-parallel-size", F_DP},
    {"-dp", F_DP},
    {"--data-parallel-size-local", F_DPL},
    {"-dpl", F_DPL},
    {"--data-parallel-start-rank", F_DPR},
    {"-dpr", F_DPR},
    {"--data-parallel-rank", F_DPN},
    {"-dpn", F_DPN},
    {"--data-parallel-backend", F_DPB},
    {"-dpb", F_DPB},
    {"--block-size", F_BLOCK},
    {"--kv-events-config", F_KVEV},
    {"--config", F_CONFIG},
    {NULL, F_COUNT},
};

/* python/sglang/srt/server_args.py, ServerArgs.add_cli_args; --dp is the
 * abbreviation of --dp-size that SGLang's documentation uses (argparse
 * takes a unique prefix) */
static const ea_name sglang_names[] = {
    {"--data-parallel-size", F_DP},
    {"--dp-size", F_DP},
    {"--dp", F_DP},
    {"--page-size", F_BLOCK},
    {"--kv-events-config", F_KVEV},
    {"--nnodes", F_NNODES},
    {"--config", F_CONFIG},
    {NULL, F_COUNT},
};

/* The flags' names in messages. */
static const char *const vllm_canon[F_COUNT] = {
    "--data-parallel-size",
    "--data-parallel-size-local",
    "--data-parallel-start-rank",
    "--data-parallel-rank",
    "--data-parallel-backend",
    "--block-size",
    "--kv-events-config",
    "--nnodes",
    "--config",
};
static const char *const sglang_canon[F_COUNT] = {
    "--dp-size",          "-",        "-",        "-", "-", "--page-size",
    "--kv-events-config", "--nnodes", "--config",
};

/* What the command line gives, the last of each flag winning. */
typedef struct ea_scan {
	kvc_ea_kind kind;
	const char *const *canon;
	bool given[F_COUNT];
	const kvc_ew *val[F_COUNT]; /* NULL: given without a value */
	kvc_ew eqv[F_COUNT];        /* a --flag=value's value */
	json_t *dotted;             /* vLLM's --kv-events-config.FIELD values */
	bool dotted_dyn;
} ea_scan;

/* A flag's state, as the rules below read it. */
typedef enum ea_fstate { FS_ABSENT = 0, FS_SET, FS_UNKNOWN } ea_fstate;

static void
ev_set(kvc_ea_value *v, uint32_t x, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(v->said, sizeof(v->said), fmt, ap);
	va_end(ap);
	v->state = KVC_EA_SET;
	v->none = false;
	v->value = x;
}

static void
ev_unknown(kvc_ea_value *v, const char *why)
{
	snprintf(v->said, sizeof(v->said), "%s", why);
	v->state = KVC_EA_UNKNOWN;
}

/* ---- the flags ----------------------------------------------------- */

/* vllm_name turns '_' into '-' in a --flag's name up to its first '.',
 * as vLLM's FlexibleArgumentParser.parse_args does. */
static void
vllm_name(char *name)
{
	if (strncmp(name, "--", 2) != 0) {
		return;
	}
	for (char *p = name + 2; *p != '\0' && *p != '.'; p++) {
		*p = *p == '_' ? '-' : *p;
	}
}

static ea_flag
ea_lookup(const ea_scan *sc, const char *name)
{
	const ea_name *t = sc->kind == KVC_EA_VLLM ? vllm_names : sglang_names;
	for (; t->name != NULL; t++) {
		if (strcmp(t->name, name) == 0) {
			return t->f;
		}
	}
	return F_COUNT;
}

/* ea_dotted keeps --kv-events-config.FIELD=value: the value as JSON when
 * it is, else as a string (argparse_utils.py, parse_args). */
static void
ea_dotted(ea_scan *sc, const char *field, const kvc_ew *v)
{
	if (sc->dotted == NULL) {
		sc->dotted = json_object();
	}
	if (v == NULL) {
		return;
	}
	json_t *j = json_loads(v->s, JSON_DECODE_ANY, NULL);
	json_object_set_new(sc->dotted, field,
			    j != NULL ? j : json_string(v->s));
	sc->dotted_dyn = sc->dotted_dyn || v->dyn;
}

/* ea_scan_args reads the engine's flags from ws[from..]; nothing after a
 * bare "--". */
static void
ea_scan_args(ea_scan *sc, const kvc_ewords *ws, size_t from)
{
	static const char dotted[] = "--kv-events-config.";
	for (size_t i = from; i < ws->n; i++) {
		const kvc_ew *w = &ws->w[i];
		if (strcmp(w->s, "--") == 0) {
			break;
		}
		char name[80];
		const char *eq = strchr(w->s, '=');
		size_t nl = eq != NULL ? (size_t)(eq - w->s) : strlen(w->s);
		if (w->s[0] != '-' || nl >= sizeof(name)) {
			continue;
		}
		memcpy(name, w->s, nl);
		name[nl] = '\0';
		if (sc->kind == KVC_EA_VLLM) {
			vllm_name(name);
		}
		bool is_dotted = sc->kind == KVC_EA_VLLM &&
				 strncmp(name, dotted, sizeof(dotted) - 1) == 0;
		ea_flag f = is_dotted ? F_KVEV : ea_lookup(sc, name);
		if (f == F_COUNT) {
			continue;
		}
		kvc_ew eqv = {.s = eq != NULL ? (char *)eq + 1 : NULL,
			      .dyn = w->dyn};
		const kvc_ew *v = eq != NULL      ? &eqv
				  : i + 1 < ws->n ? &ws->w[++i]
						  : NULL;
		if (is_dotted) {
			ea_dotted(sc, name + sizeof(dotted) - 1, v);
			continue;
		}
		sc->given[f] = true;
		sc->eqv[f] = eqv;
		sc->val[f] = v == &eqv ? &sc->eqv[f] : v;
	}
}

/* ea_decimal parses a plain decimal of at most 9 digits. */
static bool
ea_decimal(const char *s, uint32_t *out)
{
	size_t n = strspn(s, "0123456789");
	if (n == 0 || n > 9 || s[n] != '\0') {
		return false;
	}
	*out = (uint32_t)strtoul(s, NULL, 10);
	return true;
}

/* fl_value returns flag f's value word: FS_SET with *v, FS_ABSENT, or
 * FS_UNKNOWN with why (absent while --config may set it, given without
 * a value, or set when the container starts). */
static ea_fstate
fl_value(const ea_scan *sc, ea_flag f, const kvc_ew **v, char *why, size_t wl)
{
	const char *name = sc->canon[f];
	if (!sc->given[f]) {
		if (!sc->given[F_CONFIG]) {
			return FS_ABSENT;
		}
		snprintf(why, wl,
			 "the engine's %s may be set by its --config file",
			 name);
		return FS_UNKNOWN;
	}
	if (sc->val[f] == NULL) {
		snprintf(why, wl, "the engine's %s is given without a value",
			 name);
		return FS_UNKNOWN;
	}
	if (sc->val[f]->dyn) {
		snprintf(why, wl,
			 "the engine's %s is %.40s, set when the container "
			 "starts",
			 name, sc->val[f]->s);
		return FS_UNKNOWN;
	}
	*v = sc->val[f];
	return FS_SET;
}

/* fl_int reads flag f as an integer in lo..hi, as fl_value does. */
static ea_fstate
fl_int(const ea_scan *sc, ea_flag f, uint32_t lo, uint32_t hi, uint32_t *x,
       char *why, size_t wl)
{
	const kvc_ew *v = NULL;
	ea_fstate st = fl_value(sc, f, &v, why, wl);
	if (st != FS_SET) {
		return st;
	}
	if (!ea_decimal(v->s, x) || *x < lo || *x > hi) {
		snprintf(why, wl,
			 "the engine's %s \"%.40s\" is not an integer in "
			 "%u..%u",
			 sc->canon[f], v->s, lo, hi);
		return FS_UNKNOWN;
	}
	return FS_SET;
}

/* ---- the ranks ----------------------------------------------------- */

static void
both_unknown(kvc_engine_args *o, const char *why)
{
	ev_unknown(&o->dp_size, why);
	ev_unknown(&o->dp_start_rank, why);
}

/* vllm_start reads the start rank of a local size's ranks (0 when not
 * given). */
static void
vllm_start(const ea_scan *sc, kvc_engine_args *o)
{
	char why[128];
	uint32_t r;
	ea_fstate st = fl_int(sc, F_DPR, 0, EA_RANKS - 1, &r, why, sizeof(why));
	if (st == FS_SET) {
		ev_set(&o->dp_start_rank, r, "--data-parallel-start-rank %u",
		       r);
	} else if (st == FS_UNKNOWN) {
		ev_unknown(&o->dp_start_rank, why);
	} else {
		ev_set(&o->dp_start_rank, 0,
		       "--data-parallel-size-local without "
		       "--data-parallel-start-rank (rank 0)");
	}
}

/* What a data-parallel size flag said: nothing, something (its value, or
 * that it is given with a value not known yet), or that neither value can
 * be known (both_unknown has said so). */
typedef enum ea_size { SZ_ABSENT, SZ_READ, SZ_STOP } ea_size;

/* dp_size_of reads the DP size from flag f, spelled name. */
static ea_size
dp_size_of(const ea_scan *sc, kvc_engine_args *o, ea_flag f, const char *name)
{
	char why[128];
	uint32_t n;
	ea_fstate st = fl_int(sc, f, 1, EA_RANKS, &n, why, sizeof(why));
	if (st == FS_ABSENT) {
		return SZ_ABSENT;
	}
	if (st == FS_UNKNOWN && !sc->given[f]) {
		both_unknown(o, why);
		return SZ_STOP;
	}
	if (st == FS_SET) {
		ev_set(&o->dp_size, n, "%s %u", name, n);
	} else {
		ev_unknown(&o->dp_size, why);
	}
	return SZ_READ;
}

/* vllm_local reads --data-parallel-size-local and the start rank, or
 * failing that --data-parallel-size (EngineArgs.create_engine_config).
 * A flag given with a value set at the start leaves the other value
 * known; one that --config may set leaves neither. */
static void
vllm_local(const ea_scan *sc, kvc_engine_args *o)
{
	ea_size sz = dp_size_of(sc, o, F_DPL, "--data-parallel-size-local");
	if (sz != SZ_ABSENT) {
		if (sz == SZ_READ) {
			vllm_start(sc, o);
		}
		return;
	}
	/* without a local size the start rank is not read: ranks 0..N-1 */
	if (dp_size_of(sc, o, F_DP, "--data-parallel-size") == SZ_READ) {
		ev_set(&o->dp_start_rank, 0,
		       "--data-parallel-size without "
		       "--data-parallel-size-local (rank 0)");
	}
}

/* vllm_dp applies vLLM's rules for the ranks an engine hosts. */
static void
vllm_dp(const ea_scan *sc, kvc_engine_args *o)
{
	char why[128];
	const kvc_ew *b = NULL;
	ea_fstate st = fl_value(sc, F_DPB, &b, why, sizeof(why));
	if (st == FS_UNKNOWN) {
		both_unknown(o, why);
		return;
	}
	if (st == FS_SET && strcmp(b->s, "ray") == 0) {
		both_unknown(o, "the engine's --data-parallel-backend is ray, "
				"which places the ranks");
		return;
	}
	uint32_t r;
	st = fl_int(sc, F_DPN, 0, EA_RANKS - 1, &r, why, sizeof(why));
	if (st == FS_ABSENT) {
		vllm_local(sc, o);
	} else if (st == FS_UNKNOWN && !sc->given[F_DPN]) {
		both_unknown(o, why);
	} else {
		ev_set(&o->dp_size, 1, "--data-parallel-rank (one rank)");
		if (st == FS_SET) {
			ev_set(&o->dp_start_rank, r, "--data-parallel-rank %u",
			       r);
		} else {
			ev_unknown(&o->dp_start_rank, why);
		}
	}
}

/* sglang_dp: --dp-size ranks from 0 on one node. */
static void
sglang_dp(const ea_scan *sc, kvc_engine_args *o)
{
	char why[128];
	uint32_t n;
	ea_fstate st = fl_int(sc, F_NNODES, 1, EA_RANKS, &n, why, sizeof(why));
	if (st == FS_UNKNOWN) {
		both_unknown(o, why);
		return;
	}
	if (st == FS_SET && n > 1) {
		snprintf(why, sizeof(why),
			 "the engine's --nnodes is %u: its ranks are spread "
			 "over its nodes",
			 n);
		both_unknown(o, why);
		return;
	}
	if (dp_size_of(sc, o, F_DP, "--dp-size") == SZ_READ) {
		ev_set(&o->dp_start_rank, 0, "--dp-size (rank 0)");
	}
}

static void
ea_block(const ea_scan *sc, kvc_engine_args *o)
{
	char why[128];
	uint32_t n;
	ea_fstate st = fl_int(sc, F_BLOCK, 1, 1u << 20, &n, why, sizeof(why));
	if (st == FS_SET) {
		ev_set(&o->block_size, n, "%s %u", sc->canon[F_BLOCK], n);
	} else if (st == FS_UNKNOWN) {
		ev_unknown(&o->block_size, why);
	}
}

/* ---- the KV events ------------------------------------------------- */

/* ea_dyn says whether s, from a word set when the container starts, has
 * an expansion in it. */
static bool
ea_dyn(bool dyn, const char *s)
{
	return dyn && (strchr(s, '$') != NULL || strchr(s, '`') != NULL);
}

/* ea_bool reads a pydantic bool (true, false, "true", "false"); absent is
 * false. -1 when it cannot. */
static int
ea_bool(const json_t *v, bool dyn)
{
	if (v == NULL || json_is_false(v)) {
		return 0;
	}
	if (json_is_true(v)) {
		return 1;
	}
	const char *s = json_string_value(v);
	if (s == NULL || ea_dyn(dyn, s)) {
		return -1;
	}
	return strcasecmp(s, "true") == 0    ? 1
	       : strcasecmp(s, "false") == 0 ? 0
					     : -1;
}

/* ea_enabled says whether cfg turns the engine's publisher on (1), off
 * (0), or cannot be read (-1, why set). */
static int
ea_enabled(kvc_ea_kind kind, const json_t *cfg, bool dyn, char *why, size_t wl)
{
	int on = 1;
	if (kind == KVC_EA_VLLM) {
		on = ea_bool(json_object_get(cfg, "enable_kv_cache_events"),
			     dyn);
		if (on < 0) {
			snprintf(why, wl,
				 "the engine's --kv-events-config "
				 "enable_kv_cache_events is not true or false");
			return -1;
		}
	}
	const json_t *p = json_object_get(cfg, "publisher");
	if (on == 0) {
		return 0;
	}
	if (p == NULL || json_is_null(p)) {
		/* vLLM: "zmq" once enabled; SGLang: "null" */
		return kind == KVC_EA_VLLM ? 1 : 0;
	}
	const char *s = json_string_value(p);
	if (s != NULL && !ea_dyn(dyn, s) &&
	    (strcmp(s, "zmq") == 0 || strcmp(s, "null") == 0)) {
		return s[0] == 'z';
	}
	snprintf(why, wl,
		 "the engine's --kv-events-config publisher %.40s is not zmq "
		 "or null",
		 s != NULL ? s : "(not a string)");
	return -1;
}

/* ea_binds says whether the engine binds its publisher to ep rather than
 * connecting it (vLLM: a "*" or "::" in it; SGLang also "0.0.0.0"). */
static bool
ea_binds(kvc_ea_kind kind, const char *ep)
{
	return strchr(ep, '*') != NULL || strstr(ep, "::") != NULL ||
	       (kind == KVC_EA_SGLANG && strstr(ep, "0.0.0.0") != NULL);
}

/* ea_port reads the port of a tcp:// endpoint of the config (field). */
static void
ea_port(kvc_ea_kind kind, const char *field, const char *ep, bool dyn,
	bool publisher, kvc_ea_value *v)
{
	char why[128];
	const char *colon = strrchr(ep, ':');
	uint32_t port = 0;
	if (ea_dyn(dyn, ep)) {
		snprintf(why, sizeof(why),
			 "the engine's --kv-events-config %s %.40s is set "
			 "when the container starts",
			 field, ep);
	} else if (strncmp(ep, "tcp://", 6) != 0 || colon == NULL ||
		   colon - ep < 6 || !ea_decimal(colon + 1, &port) ||
		   port == 0 || port > 65535) {
		snprintf(why, sizeof(why),
			 "the engine's --kv-events-config %s %.40s is not "
			 "tcp://host:port",
			 field, ep);
	} else if (publisher && !ea_binds(kind, ep)) {
		snprintf(why, sizeof(why),
			 "the engine connects its --kv-events-config %s %.40s "
			 "to that host, binding nothing on the pod",
			 field, ep);
	} else {
		ev_set(v, port, "--kv-events-config %s %.60s", field, ep);
		return;
	}
	ev_unknown(v, why);
}

/* ea_events_unknown marks the events and both ports unreadable. */
static void
ea_events_unknown(kvc_engine_args *o, const char *why)
{
	o->events = KVC_EA_EVENTS_UNKNOWN;
	snprintf(o->why, sizeof(o->why), "%s", why);
	ev_unknown(&o->zmq_port, why);
	ev_unknown(&o->replay_port, why);
}

/* ea_events_cfg reads the publisher's ports from cfg, an object. */
static void
ea_events_cfg(kvc_ea_kind kind, const json_t *cfg, bool dyn, kvc_engine_args *o)
{
	char why[128];
	int on = ea_enabled(kind, cfg, dyn, why, sizeof(why));
	if (on <= 0) {
		if (on < 0) {
			ea_events_unknown(o, why);
		}
		return; /* off: the ports are left to the fallbacks */
	}
	o->events = KVC_EA_EVENTS_ON;
	const json_t *ep = json_object_get(cfg, "endpoint");
	const json_t *rp = json_object_get(cfg, "replay_endpoint");
	if (ep == NULL) {
		/* both engines' KVEventsConfig.endpoint default */
		ev_set(&o->zmq_port, 5557,
		       "--kv-events-config without an endpoint (tcp://*:5557)");
	} else {
		ea_port(kind, "endpoint",
			json_is_string(ep) ? json_string_value(ep) : "-", dyn,
			true, &o->zmq_port);
	}
	if (rp == NULL || json_is_null(rp)) {
		ev_set(&o->replay_port, 0,
		       "--kv-events-config, which has no replay_endpoint");
		o->replay_port.none = true;
	} else {
		ea_port(kind, "replay_endpoint",
			json_is_string(rp) ? json_string_value(rp) : "-", dyn,
			false, &o->replay_port);
	}
}

/* ea_events reads --kv-events-config: whole, or vLLM's fields one by one
 * (which then replace the whole: parse_args passes them last). */
static void
ea_events(const ea_scan *sc, kvc_engine_args *o)
{
	char why[128];
	if (sc->dotted != NULL) {
		ea_events_cfg(sc->kind, sc->dotted, sc->dotted_dyn, o);
		return;
	}
	/* a value set at the start may still be JSON with only some fields
	 * expanded: it is read, and the fields ea_dyn tells */
	const kvc_ew *v = sc->val[F_KVEV];
	ea_fstate st =
	    v != NULL ? FS_SET : fl_value(sc, F_KVEV, &v, why, sizeof(why));
	if (st == FS_ABSENT) {
		return; /* no events: off */
	}
	if (st == FS_UNKNOWN) {
		ea_events_unknown(o, why);
		return;
	}
	json_t *cfg = json_loads(v->s, 0, NULL);
	if (json_is_object(cfg)) {
		ea_events_cfg(sc->kind, cfg, v->dyn, o);
	} else if (v->dyn) {
		snprintf(why, sizeof(why),
			 "the engine's --kv-events-config is %.40s, set when "
			 "the container starts",
			 v->s);
		ea_events_unknown(o, why);
	} else {
		ea_events_unknown(o, "the engine's --kv-events-config is not "
				     "a JSON object");
	}
	json_decref(cfg);
}

/* ---- the engine's container -------------------------------------- */

/* ea_engine reads what the engine's arguments ws[args..] say. */
static void
ea_engine(kvc_ea_kind kind, const kvc_ewords *ws, size_t args,
	  kvc_engine_args *o)
{
	ea_scan sc;
	memset(&sc, 0, sizeof(sc));
	sc.kind = kind;
	sc.canon = kind == KVC_EA_VLLM ? vllm_canon : sglang_canon;
	ea_scan_args(&sc, ws, args);
	o->kind = kind;
	if (kind == KVC_EA_VLLM) {
		vllm_dp(&sc, o);
	} else {
		sglang_dp(&sc, o);
	}
	ea_block(&sc, o);
	ea_events(&sc, o);
	json_decref(sc.dotted);
}

static const char ea_engines[] =
    "vllm serve, python -m vllm.entrypoints.openai.api_server, sglang "
    "serve or python -m sglang.launch_server";

/* ea_container reads container c into *o: the engine its commands run,
 * or kind NONE with why. */
static void
ea_container(const json_t *c, kvc_engine_args *o)
{
	const char *name = json_string_value(json_object_get(c, "name"));
	memset(o, 0, sizeof(*o));
	snprintf(o->container, sizeof(o->container), "%s", name ? name : "");
	kvc_ecmds cmds;
	char why[128];
	if (!kvc_container_cmds(c, &cmds, why, sizeof(why))) {
		snprintf(o->why, sizeof(o->why), "container %.63s: %.100s",
			 o->container, why);
		return;
	}
	for (size_t k = 0; k < cmds.n; k++) {
		size_t args = 0;
		kvc_ea_kind kind = kvc_engine_find(&cmds.c[k], &args);
		if (kind != KVC_EA_NONE) {
			ea_engine(kind, &cmds.c[k], args, o);
			break;
		}
	}
	if (o->kind == KVC_EA_NONE) {
		snprintf(o->why, sizeof(o->why),
			 "container %.63s runs no %.115s", o->container,
			 ea_engines);
	}
	kvc_ecmds_fini(&cmds);
}

static const json_t *
container_named(const json_t *cs, const char *name)
{
	size_t i;
	const json_t *c;
	json_array_foreach(cs, i, c)
	{
		const char *n = json_string_value(json_object_get(c, "name"));
		if (n != NULL && strcmp(n, name) == 0) {
			return c;
		}
	}
	return NULL;
}

kvi_err
kvc_engine_args_read(const json_t *spec, const char *container,
		     kvc_engine_args *out, char *err, size_t errlen)
{
	const json_t *cs = json_object_get(spec, "containers");
	kvc_engine_args o;
	memset(&o, 0, sizeof(o));
	if (container != NULL) {
		const json_t *c = container_named(cs, container);
		if (c == NULL) {
			return kvi_errf(
			    err, errlen, KVI_EINVAL,
			    "annotation %s names container "
			    "\"%.63s\", which the pod does not have",
			    KVC_KUBE_ANN_ENGINE_CONTAINER, container);
		}
		ea_container(c, &o);
	} else {
		size_t i;
		const json_t *c;
		json_array_foreach(cs, i, c)
		{
			ea_container(c, &o);
			if (o.kind != KVC_EA_NONE) {
				break;
			}
		}
		if (o.kind == KVC_EA_NONE && json_array_size(cs) != 1) {
			/* one container's why is kept: it says more */
			memset(&o, 0, sizeof(o));
			snprintf(o.why, sizeof(o.why), "no container runs %s",
				 ea_engines);
		}
	}
	*out = o;
	return KVI_OK;
}

const char *
kvc_ea_kind_name(kvc_ea_kind k)
{
	return k == KVC_EA_VLLM ? "vllm" : k == KVC_EA_SGLANG ? "sglang" : NULL;
}

const char *
kvc_ea_events_name(kvc_ea_events e)
{
	return e == KVC_EA_EVENTS_ON        ? "enabled"
	       : e == KVC_EA_EVENTS_UNKNOWN ? "unknown"
					    : "disabled";
}
