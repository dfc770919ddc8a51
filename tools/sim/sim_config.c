#include "sim_config.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "sim_json.h"

static const char usage[] =
    "usage: kvindex-sim [flags]\n"
    "\n"
    "Simulates pods x data-parallel ranks of vLLM engines on one host,\n"
    "speaking vLLM's KV event wire formats (live PUB stream, replay\n"
    "ROUTER, /kv_recover), with a control HTTP API for tests.\n"
    "\n"
    "Layout:\n"
    "  --pods P               pods (1)\n"
    "  --dp D                 data-parallel ranks per pod (1)\n"
    "  --model NAME           model name in the layout file (sim-model)\n"
    "  --block-size BS        tokens per block (16)\n"
    "  --ip IP                address every socket binds to (127.0.0.1)\n"
    "  --zmq-port PORT        live PUB ports: pod p rank r publishes on\n"
    "                         PORT + p*D + r; 0 = pick a free range (0)\n"
    "  --replay-port PORT|off replay ROUTER ports, same layout; off = no\n"
    "                         replay sockets (0)\n"
    "  --recover-port PORT|off /kv_recover HTTP ports, same layout; off =\n"
    "                         no recovery endpoint (0)\n"
    "  --metrics-port PORT|off  GET /metrics (vLLM's Prometheus counters)\n"
    "                         of pod p on PORT + p; 0 = pick a free range;\n"
    "                         off = none (off)\n"
    "  --control HOST:PORT    control HTTP server; port 0 = ephemeral\n"
    "                         (127.0.0.1:0)\n"
    "  --layout-file PATH     once every socket is bound, write the pods in\n"
    "                         the discovery-file format plus the control URL\n"
    "                         (atomically: PATH.tmp + rename)\n"
    "\n"
    "Ranks:\n"
    "  --cache-blocks N       GPU blocks per rank (4096)\n"
    "  --cpu-blocks N         CPU blocks per rank, write-through; 0 = no CPU\n"
    "                         tier (0)\n"
    "  --offload              the CPU tier is an offloading connector: its\n"
    "                         stores carry no tokens and a nil parent\n"
    "                         (needs --cpu-blocks)\n"
    "  --offload-bs0          offload stores say block_size 0 (needs\n"
    "                         --offload)\n"
    "  --flavours LIST        engine flavour per pod, comma-separated and\n"
    "                         cycled (pod p gets LIST[p % len]): vllm,\n"
    "                         vllm-0.26, sglang, sglang-map, legacy;\n"
    "                         overrides --form and --hash-format (none:\n"
    "                         --form and --hash-format for every pod)\n"
    "  --kv-groups LIST       KV cache groups of a hybrid model per pod:\n"
    "                         models separated by '/' and cycled (pod p\n"
    "                         gets LIST[p % len]), each a comma-separated\n"
    "                         list of KIND[:BLOCK_SIZE[:BLOCKS]]; KIND is\n"
    "                         full, mla, swa=WINDOW, swa-mla=WINDOW,\n"
    "                         chunked=CHUNK, mamba=all or mamba=align;\n"
    "                         BLOCK_SIZE a multiple of --block-size (it),\n"
    "                         BLOCKS the group's capacity (--cache-blocks);\n"
    "                         none: one full-attention group, no group\n"
    "                         fields on the wire\n"
    "  --replay-buffer N      batches kept for replay (10000)\n"
    "  --replay-topic yes|no  replay replies carry the topic frame, as vLLM\n"
    "                         >= 0.26 (yes); no = older vLLM and SGLang\n"
    "  --recover-log N        batches kept for /kv_recover Events (100000)\n"
    "  --form map|legacy      event encoding: current tagged maps or legacy\n"
    "                         tagged arrays (map)\n"
    "  --hash-format uint|int64|bin  block hashes as unsigned ints, signed\n"
    "                         int64 (SGLang) or 32-byte bin (uint)\n"
    "  --no-rank              send 2-element batches without\n"
    "                         data_parallel_rank (older engines)\n"
    "  --dp-group             the pods are one data-parallel group: rank r\n"
    "                         of pod p is global rank p*DP+r, in its\n"
    "                         batches and on base port + that rank (vLLM's\n"
    "                         --data-parallel-start-rank over several pods)\n"
    "  --topic STR            topic frame of every message (empty)\n"
    "  --hash-salt N          salt of the external block hashes (derived\n"
    "                         from --seed)\n"
    "  --sub-delay-ms MS      a subscriber's subscription takes effect MS\n"
    "                         ms after it reaches the rank, which publishes\n"
    "                         a batch of its own just before (0: at once;\n"
    "                         not with --prefill-rate)\n"
    "\n"
    "Load (none by default: only POST /prefill runs requests):\n"
    "  --trace PATH           Mooncake jsonl trace (hash_ids per line)\n"
    "  --blocks-per-id K      blocks per trace hash id (1)\n"
    "  --copies C             serve the trace C times, disjoint ids (1)\n"
    "  --generate N           N synthetic prompts with shared prefixes\n"
    "  --salts N              each prompt has one of N cache salts or none,\n"
    "                         drawn per conversation or trace line (0)\n"
    "  --loras N              likewise one of N LoRA names or none (0)\n"
    "  --mm-every N           about one prompt in N carries an image: 3 to\n"
    "                         40 blocks of placeholder tokens after its\n"
    "                         first id (0: none)\n"
    "  --rate R               requests/s over the whole fleet; 0 = as fast\n"
    "                         as possible (0)\n"
    "  --requests N           stop after N requests (at most one pass\n"
    "                         without --loop; default: one pass)\n"
    "  --loop                 repeat the load forever (or until --requests)\n"
    "  --route random|round-robin  which (pod, rank) runs a request\n"
    "                         (random)\n"
    "  --seed S               routing and generator seed (1)\n"
    "  --requests-per-batch K requests folded into one step and batch (1)\n"
    "  --paused               start with load generation paused\n"
    "\n"
    "Time (tools/sim/README.md, \"Timed mode\"):\n"
    "  --prefill-rate TOK/S   each rank prefills its requests one at a\n"
    "                         time, in arrival order, computing uncached\n"
    "                         tokens at this rate; 0 = requests run at\n"
    "                         once (0)\n"
    "  --prefill-chunk TOKENS tokens per engine step (chunked prefill),\n"
    "                         each step one batch; 0 = the whole prompt\n"
    "                         (8192)\n"
    "  --max-queue N          requests waiting per rank; beyond, /prefill\n"
    "                         gets 503 and the load waits (1024)\n"
    "\n"
    "Process:\n"
    "  --log-file PATH        append log lines to PATH (standard error)\n"
    "  --log-level L          debug, info, warn or error (info)\n"
    "  --help                 this text\n"
    "\n"
    "SIGTERM, SIGINT or POST /quit exit cleanly. The control API is\n"
    "described in tools/sim/README.md.\n";

void
sim_config_usage(FILE *f)
{
	fputs(usage, f);
}

enum {
	OPT_PODS = 256,
	OPT_DP,
	OPT_MODEL,
	OPT_BLOCK_SIZE,
	OPT_IP,
	OPT_ZMQ_PORT,
	OPT_REPLAY_PORT,
	OPT_RECOVER_PORT,
	OPT_METRICS_PORT,
	OPT_CONTROL,
	OPT_LAYOUT_FILE,
	OPT_CACHE_BLOCKS,
	OPT_CPU_BLOCKS,
	OPT_OFFLOAD,
	OPT_OFFLOAD_BS0,
	OPT_FLAVOURS,
	OPT_KV_GROUPS,
	OPT_REPLAY_BUFFER,
	OPT_REPLAY_TOPIC,
	OPT_RECOVER_LOG,
	OPT_FORM,
	OPT_HASH_FORMAT,
	OPT_NO_RANK,
	OPT_DP_GROUP,
	OPT_TOPIC,
	OPT_HASH_SALT,
	OPT_SUB_DELAY_MS,
	OPT_TRACE,
	OPT_BLOCKS_PER_ID,
	OPT_COPIES,
	OPT_GENERATE,
	OPT_SALTS,
	OPT_LORAS,
	OPT_MM_EVERY,
	OPT_RATE,
	OPT_REQUESTS,
	OPT_LOOP,
	OPT_ROUTE,
	OPT_SEED,
	OPT_REQUESTS_PER_BATCH,
	OPT_PAUSED,
	OPT_PREFILL_RATE,
	OPT_PREFILL_CHUNK,
	OPT_MAX_QUEUE,
	OPT_LOG_FILE,
	OPT_LOG_LEVEL,
	OPT_HELP,
};

static const struct option options[] = {
    {"pods", required_argument, NULL, OPT_PODS},
    {"dp", required_argument, NULL, OPT_DP},
    {"model", required_argument, NULL, OPT_MODEL},
    {"block-size", required_argument, NULL, OPT_BLOCK_SIZE},
    {"ip", required_argument, NULL, OPT_IP},
    {"zmq-port", required_argument, NULL, OPT_ZMQ_PORT},
    {"replay-port", required_argument, NULL, OPT_REPLAY_PORT},
    {"recover-port", required_argument, NULL, OPT_RECOVER_PORT},
    {"metrics-port", required_argument, NULL, OPT_METRICS_PORT},
    {"control", required_argument, NULL, OPT_CONTROL},
    {"layout-file", required_argument, NULL, OPT_LAYOUT_FILE},
    {"cache-blocks", required_argument, NULL, OPT_CACHE_BLOCKS},
    {"cpu-blocks", required_argument, NULL, OPT_CPU_BLOCKS},
    {"offload", no_argument, NULL, OPT_OFFLOAD},
    {"offload-bs0", no_argument, NULL, OPT_OFFLOAD_BS0},
    {"flavours", required_argument, NULL, OPT_FLAVOURS},
    {"kv-groups", required_argument, NULL, OPT_KV_GROUPS},
    {"replay-buffer", required_argument, NULL, OPT_REPLAY_BUFFER},
    {"replay-topic", required_argument, NULL, OPT_REPLAY_TOPIC},
    {"recover-log", required_argument, NULL, OPT_RECOVER_LOG},
    {"form", required_argument, NULL, OPT_FORM},
    {"hash-format", required_argument, NULL, OPT_HASH_FORMAT},
    {"no-rank", no_argument, NULL, OPT_NO_RANK},
    {"dp-group", no_argument, NULL, OPT_DP_GROUP},
    {"topic", required_argument, NULL, OPT_TOPIC},
    {"hash-salt", required_argument, NULL, OPT_HASH_SALT},
    {"sub-delay-ms", required_argument, NULL, OPT_SUB_DELAY_MS},
    {"trace", required_argument, NULL, OPT_TRACE},
    {"blocks-per-id", required_argument, NULL, OPT_BLOCKS_PER_ID},
    {"copies", required_argument, NULL, OPT_COPIES},
    {"generate", required_argument, NULL, OPT_GENERATE},
    {"salts", required_argument, NULL, OPT_SALTS},
    {"loras", required_argument, NULL, OPT_LORAS},
    {"mm-every", required_argument, NULL, OPT_MM_EVERY},
    {"rate", required_argument, NULL, OPT_RATE},
    {"requests", required_argument, NULL, OPT_REQUESTS},
    {"loop", no_argument, NULL, OPT_LOOP},
    {"route", required_argument, NULL, OPT_ROUTE},
    {"seed", required_argument, NULL, OPT_SEED},
    {"requests-per-batch", required_argument, NULL, OPT_REQUESTS_PER_BATCH},
    {"paused", no_argument, NULL, OPT_PAUSED},
    {"prefill-rate", required_argument, NULL, OPT_PREFILL_RATE},
    {"prefill-chunk", required_argument, NULL, OPT_PREFILL_CHUNK},
    {"max-queue", required_argument, NULL, OPT_MAX_QUEUE},
    {"log-file", required_argument, NULL, OPT_LOG_FILE},
    {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

static const char *
flag_name(int opt)
{
	for (const struct option *o = options; o->name != NULL; o++) {
		if (o->val == opt) {
			return o->name;
		}
	}
	return "?";
}

static void
defaults(sim_config *c)
{
	memset(c, 0, sizeof(*c));
	c->pods = 1;
	c->dp = 1;
	c->model = "sim-model";
	c->block_size = 16;
	c->ip = "127.0.0.1";
	c->control_host = kvi_strdup("127.0.0.1");
	c->cache_blocks = 4096;
	c->replay_buffer = 10000;
	c->replay_topic = true;
	c->recover_log = 100000;
	c->form = KVI_FORM_MAP;
	c->hash_form = KVI_HASH_UINT;
	c->with_rank = true;
	c->topic = "";
	c->blocks_per_id = 1;
	c->copies = 1;
	c->route = SIM_ROUTE_RANDOM;
	c->seed = 1;
	c->requests_per_batch = 1;
	c->metrics_port.off = true;
	c->prefill_chunk = 8192;
	c->max_queue = 1024;
	c->log_level = KVI_LOG_INFO;
}

/* u32_in parses a decimal in [min, max]. */
static bool
u32_in(const char *s, uint32_t min, uint32_t max, uint32_t *out)
{
	uint64_t v;
	if (!sim_parse_u64(s, &v) || v < min || v > max) {
		return false;
	}
	*out = (uint32_t)v;
	return true;
}

static bool
size_arg(const char *s, size_t *out)
{
	uint64_t v;
	if (!sim_parse_u64(s, &v) || v > SIZE_MAX / 2) {
		return false;
	}
	*out = (size_t)v;
	return true;
}

static bool
port_flag(const char *s, bool may_be_off, sim_port_flag *out)
{
	uint32_t v;
	if (may_be_off && strcmp(s, "off") == 0) {
		out->base = 0;
		out->off = true;
		return true;
	}
	if (!u32_in(s, 0, 65535, &v)) {
		return false;
	}
	out->base = (int)v;
	out->off = false;
	return true;
}

static bool
control_flag(sim_config *c, const char *s)
{
	const char *colon = strrchr(s, ':');
	uint32_t port;
	if (colon == NULL || colon == s ||
	    !u32_in(colon + 1, 0, 65535, &port)) {
		return false;
	}
	kvi_free(c->control_host);
	c->control_host = kvi_strndup(s, (size_t)(colon - s));
	c->control_port = (int)port;
	return true;
}

/* flavours_flag parses a comma-separated list of flavour names. */
static bool
flavours_flag(sim_config *c, const char *s)
{
	c->n_flavours = 0;
	for (;;) {
		const char *comma = strchr(s, ',');
		size_t len = comma ? (size_t)(comma - s) : strlen(s);
		if (c->n_flavours == SIM_MAX_FLAVOURS ||
		    !sim_flavour_parse(s, len, &c->flavours[c->n_flavours])) {
			return false;
		}
		c->n_flavours++;
		if (comma == NULL) {
			return true;
		}
		s = comma + 1;
	}
}

static bool
rate_flag(const char *s, double *out)
{
	char *end;
	double v = strtod(s, &end);
	if (end == s || *end != '\0' || !(v >= 0) || v > 1e9) {
		return false;
	}
	*out = v;
	return true;
}

/* apply parses the value of one flag; returns false if it is invalid. */
static bool
apply(sim_config *c, int opt, const char *v, bool *help)
{
	switch (opt) {
	case OPT_PODS:
		return u32_in(v, 1, 65536, &c->pods);
	case OPT_DP:
		return u32_in(v, 1, 65536, &c->dp);
	case OPT_MODEL:
		c->model = v;
		return *v != '\0';
	case OPT_BLOCK_SIZE:
		return u32_in(v, 1, 1 << 16, &c->block_size);
	case OPT_IP:
		c->ip = v;
		return *v != '\0';
	case OPT_ZMQ_PORT:
		return port_flag(v, false, &c->zmq_port);
	case OPT_REPLAY_PORT:
		return port_flag(v, true, &c->replay_port);
	case OPT_RECOVER_PORT:
		return port_flag(v, true, &c->recover_port);
	case OPT_METRICS_PORT:
		return port_flag(v, true, &c->metrics_port);
	case OPT_CONTROL:
		return control_flag(c, v);
	case OPT_LAYOUT_FILE:
		c->layout_file = v;
		return *v != '\0';
	case OPT_CACHE_BLOCKS:
		return u32_in(v, 1, 1u << 30, &c->cache_blocks);
	case OPT_CPU_BLOCKS:
		return u32_in(v, 0, 1u << 30, &c->cpu_blocks);
	case OPT_OFFLOAD:
		c->offload = true;
		return true;
	case OPT_OFFLOAD_BS0:
		c->offload_bs0 = true;
		return true;
	case OPT_FLAVOURS:
		return flavours_flag(c, v);
	case OPT_KV_GROUPS:
		c->kv_groups = v;
		return *v != '\0';
	case OPT_REPLAY_BUFFER:
		return size_arg(v, &c->replay_buffer);
	case OPT_REPLAY_TOPIC:
		c->replay_topic = strcmp(v, "yes") == 0;
		return c->replay_topic || strcmp(v, "no") == 0;
	case OPT_RECOVER_LOG:
		return size_arg(v, &c->recover_log);
	case OPT_FORM:
		c->form =
		    strcmp(v, "legacy") == 0 ? KVI_FORM_LEGACY : KVI_FORM_MAP;
		return strcmp(v, "legacy") == 0 || strcmp(v, "map") == 0;
	case OPT_HASH_FORMAT:
		if (strcmp(v, "uint") == 0) {
			c->hash_form = KVI_HASH_UINT;
		} else if (strcmp(v, "int64") == 0) {
			c->hash_form = KVI_HASH_INT64;
		} else if (strcmp(v, "bin") == 0) {
			c->hash_form = KVI_HASH_BIN32;
		} else {
			return false;
		}
		return true;
	case OPT_NO_RANK:
		c->with_rank = false;
		return true;
	case OPT_DP_GROUP:
		c->dp_group = true;
		return true;
	case OPT_TOPIC:
		c->topic = v;
		return true;
	case OPT_HASH_SALT:
		return sim_parse_u64(v, &c->hash_salt);
	case OPT_SUB_DELAY_MS:
		return u32_in(v, 0, 60000, &c->sub_delay_ms);
	case OPT_TRACE:
		c->trace = v;
		return *v != '\0';
	case OPT_BLOCKS_PER_ID:
		return u32_in(v, 1, 1u << 16, &c->blocks_per_id);
	case OPT_COPIES:
		return u32_in(v, 1, 1u << 20, &c->copies);
	case OPT_GENERATE:
		return u32_in(v, 1, UINT32_MAX, &c->generate);
	case OPT_SALTS:
		return u32_in(v, 0, 1u << 20, &c->salts);
	case OPT_LORAS:
		return u32_in(v, 0, 1u << 20, &c->loras);
	case OPT_MM_EVERY:
		return u32_in(v, 0, UINT32_MAX, &c->mm_every);
	case OPT_RATE:
		return rate_flag(v, &c->rate);
	case OPT_REQUESTS:
		return sim_parse_u64(v, &c->requests) && c->requests > 0;
	case OPT_LOOP:
		c->loop = true;
		return true;
	case OPT_ROUTE:
		c->route = strcmp(v, "round-robin") == 0 ? SIM_ROUTE_ROUND_ROBIN
							 : SIM_ROUTE_RANDOM;
		return strcmp(v, "round-robin") == 0 ||
		       strcmp(v, "random") == 0;
	case OPT_SEED:
		return sim_parse_u64(v, &c->seed);
	case OPT_REQUESTS_PER_BATCH:
		return u32_in(v, 1, 1u << 16, &c->requests_per_batch);
	case OPT_PAUSED:
		c->paused = true;
		return true;
	case OPT_PREFILL_RATE:
		return rate_flag(v, &c->prefill_rate);
	case OPT_PREFILL_CHUNK:
		return sim_parse_u64(v, &c->prefill_chunk) &&
		       c->prefill_chunk <= UINT32_MAX;
	case OPT_MAX_QUEUE:
		return u32_in(v, 1, 1u << 24, &c->max_queue);
	case OPT_LOG_FILE:
		c->log_file = v;
		return *v != '\0';
	case OPT_LOG_LEVEL:
		return kvi_log_parse_level(v, &c->log_level) == KVI_OK;
	case OPT_HELP:
		*help = true;
		return true;
	}
	return false;
}

/* parse_groups parses --kv-groups: one model per pod, '/'-separated. */
static kvi_err
parse_groups(sim_config *c, char *err, size_t errlen)
{
	const char *s = c->kv_groups;
	c->groups = kvi_calloc(SIM_MAX_FLAVOURS, sizeof(*c->groups));
	for (;;) {
		const char *slash = strchr(s, '/');
		size_t len = slash ? (size_t)(slash - s) : strlen(s);
		if (c->n_groups == SIM_MAX_FLAVOURS) {
			snprintf(err, errlen, "--kv-groups: at most %d models",
				 SIM_MAX_FLAVOURS);
			return KVI_EINVAL;
		}
		const char *why =
		    sim_groups_parse(s, len, c->block_size, c->cache_blocks,
				     &c->groups[c->n_groups]);
		if (why != NULL) {
			snprintf(err, errlen, "--kv-groups \"%.*s\": %s",
				 (int)len, s, why);
			return KVI_EINVAL;
		}
		c->n_groups++;
		if (slash == NULL) {
			return KVI_OK;
		}
		s = slash + 1;
	}
}

/* validate_groups checks what KV cache groups do not go with: a CPU tier,
 * SGLang's events (no group fields), keys on a model with a group of
 * another block size (sim_groups.h). */
static kvi_err
validate_groups(sim_config *c, char *err, size_t errlen)
{
	kvi_err rv = parse_groups(c, err, errlen);
	if (rv != KVI_OK) {
		return rv;
	}
	if (c->cpu_blocks > 0) {
		snprintf(err, errlen,
			 "--kv-groups has no CPU tier: no --cpu-blocks");
		return KVI_EINVAL;
	}
	for (uint32_t i = 0; i < c->n_flavours; i++) {
		if (sim_flavour_sglang(c->flavours[i])) {
			snprintf(err, errlen,
				 "--kv-groups needs vLLM flavours");
			return KVI_EINVAL;
		}
	}
	bool keys = c->salts > 0 || c->loras > 0 || c->mm_every > 0;
	for (uint32_t i = 0; keys && i < c->n_groups; i++) {
		if (!sim_groups_keys_ok(&c->groups[i])) {
			snprintf(err, errlen,
				 "--salts, --loras and --mm-every need every "
				 "group's block size to be --block-size");
			return KVI_EINVAL;
		}
	}
	return KVI_OK;
}

static kvi_err
validate(sim_config *c, char *err, size_t errlen)
{
	uint64_t ranks = (uint64_t)c->pods * c->dp;
	const sim_port_flag *ports[] = {&c->zmq_port, &c->replay_port,
					&c->recover_port};
	if (ranks > 60000) {
		snprintf(err, errlen, "%llu ranks: at most 60000",
			 (unsigned long long)ranks);
		return KVI_EINVAL;
	}
	for (size_t i = 0; i < 3; i++) {
		if (ports[i]->base != 0 &&
		    (uint64_t)ports[i]->base + ranks - 1 > 65535) {
			snprintf(
			    err, errlen,
			    "port range from %d for %llu ranks passes 65535",
			    ports[i]->base, (unsigned long long)ranks);
			return KVI_EINVAL;
		}
	}
	if (!c->metrics_port.off && c->metrics_port.base != 0 &&
	    (uint64_t)c->metrics_port.base + c->pods - 1 > 65535) {
		snprintf(err, errlen, "metrics port range from %d passes 65535",
			 c->metrics_port.base);
		return KVI_EINVAL;
	}
	if (c->trace != NULL && c->generate > 0) {
		snprintf(err, errlen,
			 "--trace and --generate exclude each other");
		return KVI_EINVAL;
	}
	if (c->offload && c->cpu_blocks == 0) {
		snprintf(err, errlen, "--offload needs --cpu-blocks");
		return KVI_EINVAL;
	}
	if (c->offload_bs0 && !c->offload) {
		snprintf(err, errlen, "--offload-bs0 needs --offload");
		return KVI_EINVAL;
	}
	if (c->sub_delay_ms > 0 && c->prefill_rate > 0) {
		snprintf(err, errlen,
			 "--sub-delay-ms publishes at once: not with "
			 "--prefill-rate");
		return KVI_EINVAL;
	}
	if (c->kv_groups != NULL) {
		kvi_err rv = validate_groups(c, err, errlen);
		if (rv != KVI_OK) {
			return rv;
		}
	}
	if (c->hash_salt == 0) {
		c->hash_salt =
		    c->seed * 0x9e3779b97f4a7c15u ^ 0x73696d73616c74u;
	}
	return KVI_OK;
}

kvi_err
sim_config_parse(int argc, char **argv, sim_config *cfg, bool *help, char *err,
		 size_t errlen)
{
	defaults(cfg);
	*help = false;
	optind = 1;
	opterr = 0;
	int opt;
	while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
		if (opt == '?' || opt == ':') {
			snprintf(err, errlen,
				 "unknown flag or missing value: %s",
				 argv[optind - 1]);
			return KVI_EINVAL;
		}
		if (!apply(cfg, opt, optarg, help)) {
			snprintf(err, errlen, "invalid value for --%s: %s",
				 flag_name(opt), optarg ? optarg : "");
			return KVI_EINVAL;
		}
	}
	if (optind < argc) {
		snprintf(err, errlen, "unexpected argument: %s", argv[optind]);
		return KVI_EINVAL;
	}
	return *help ? KVI_OK : validate(cfg, err, errlen);
}

void
sim_config_fini(sim_config *cfg)
{
	kvi_free(cfg->control_host);
	cfg->control_host = NULL;
	kvi_free(cfg->groups);
	cfg->groups = NULL;
	cfg->n_groups = 0;
}
