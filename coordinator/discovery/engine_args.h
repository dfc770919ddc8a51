/*
 * engine_args.h - what an engine pod's own command line says of the
 * settings the coordinator needs, read from the pod's spec without I/O.
 *
 * A pod whose engine runs `vllm serve --data-parallel-size 4` has four
 * ranks whether or not anyone annotated it. kvc_engine_args_read() finds
 * the engine container in a pod object's spec, reads its argv and
 * returns, for each of dp_size, dp_start_rank, zmq_port, replay_port and
 * block_size, whether the arguments give it, the value and how they say
 * it. The Kubernetes parser (kube_parse.c) then decides:
 *
 *   the annotation wins when present; else the engine's arguments; else
 *   the coordinator's flag default. An annotation that disagrees with the
 *   arguments, or a value the arguments leave to the shell with no
 *   annotation, makes the pod unregistrable with a reason naming both.
 *
 * Finding the engine. The annotation kvindex.io/engine-container names
 * the container; without it, the first container whose command runs an
 * engine is taken. A container's argv is its command then its args (a
 * container without a command that runs the vllm/vllm-openai image gets
 * that image's entrypoint, `vllm serve`). An argv of a shell given a
 * script (`["/bin/sh", "-c", "vllm serve m ..."]`, bash, `-ec` and the
 * like) is split into commands and words by simple shell rules: quotes,
 * backslashes, `;`, `&&`, `||`, `|`, `&`, newlines, redirections,
 * comments; leading `exec`, `env` and VAR=value words are skipped. The
 * engines recognised:
 *
 *   vLLM    vllm serve ..., python[3] -m vllm.entrypoints.openai.api_server,
 *           python[3] -m vllm.entrypoints.cli.main serve
 *   SGLang  sglang serve ..., python[3] -m sglang.launch_server
 *
 * Flags read, in `--flag value` and `--flag=value` forms, the last one
 * given winning (argparse), nothing after a bare `--`:
 *
 *   vLLM (vllm/engine/arg_utils.py, EngineArgs.add_cli_args): --data-
 *   parallel-size/-dp, --data-parallel-size-local/-dpl, --data-parallel-
 *   start-rank/-dpr, --data-parallel-rank/-dpn, --data-parallel-backend/
 *   -dpb, --block-size, --kv-events-config (JSON, or its fields one by one
 *   as --kv-events-config.endpoint=..., vllm/utils/argparse_utils.py
 *   FlexibleArgumentParser.parse_args, which also takes '_' for '-' in a
 *   flag's name) and --config.
 *   SGLang (python/sglang/srt/server_args.py, ServerArgs.add_cli_args):
 *   --data-parallel-size/--dp-size (and --dp, the abbreviation its docs
 *   use), --page-size (its block size), --kv-events-config, --nnodes and
 *   --config.
 *
 * The ranks a pod hosts, as vLLM decides them (arg_utils.py,
 * EngineArgs.create_engine_config): with --data-parallel-rank R, one
 * rank, R; else with --data-parallel-size-local L, L ranks from
 * --data-parallel-start-rank S (0 when not given); else
 * --data-parallel-size N ranks from 0 (vLLM ignores a start rank without
 * a local size); with --data-parallel-backend ray Ray places the ranks,
 * so neither is known. SGLang: --dp-size N ranks from 0, every one
 * publishing on its own port (python/sglang/srt/disaggregation/
 * kv_events.py, select_kv_publisher_dp_rank); unknown with --nnodes > 1.
 *
 * The KV events (--kv-events-config): vLLM publishes when
 * enable_kv_cache_events is true and publisher is not "null" (publisher
 * defaults to "zmq" then; vllm/config/kv_events.py KVEventsConfig,
 * vllm/distributed/kv_events.py EventPublisherFactory.create); SGLang
 * when publisher is "zmq" (its default is "null"; kv_events.py
 * KVEventsConfig). Both default endpoint to port 5557 on every address and
 * replay_endpoint to none, and bind the publisher only to a wildcard host
 * (vLLM: "*" or "::"; SGLang also "0.0.0.0"), connecting otherwise. The
 * zmq port is the endpoint's, the replay port the replay_endpoint's (none
 * when it has none). Events not enabled leave both ports to the
 * annotations and defaults.
 *
 * Values the arguments do not fix are never guessed: a word the shell
 * expands ($DP, "${X}", "$(( ... ))", `cmd`), Kubernetes' $(VAR) in a
 * command or args when the container's env gives VAR no literal value
 * (valueFrom, envFrom, a var defined after the one naming it; a literal
 * one is expanded as Kubernetes does, $$ escaping), a flag absent from
 * the command line when
 * --config names a file that may set it, a value that is not a plain
 * decimal in range, an endpoint that is not a bound tcp:// one - each is
 * KVC_EA_UNKNOWN with why.
 */
#ifndef KVI_COORDINATOR_ENGINE_ARGS_H
#define KVI_COORDINATOR_ENGINE_ARGS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* The annotation naming the engine's container. */
#define KVC_KUBE_ANN_ENGINE_CONTAINER "kvindex.io/engine-container"

typedef enum kvc_ea_kind {
	KVC_EA_NONE = 0, /* no container runs an engine this reads */
	KVC_EA_VLLM,
	KVC_EA_SGLANG,
} kvc_ea_kind;

/* What the arguments say of one value. */
typedef enum kvc_ea_state {
	KVC_EA_ABSENT = 0, /* nothing: the caller's fallback applies */
	KVC_EA_SET,        /* a literal value (or, for the replay port, none) */
	KVC_EA_UNKNOWN,    /* given, or maybe given, but not readable here */
} kvc_ea_state;

typedef struct kvc_ea_value {
	kvc_ea_state state;
	bool none;      /* SET: the engine has none (no replay_endpoint) */
	uint32_t value; /* SET and not none */
	/* SET: how the arguments say it ("--data-parallel-size-local 4");
	 * UNKNOWN: why it cannot be read */
	char said[128];
} kvc_ea_value;

/* Whether the engine publishes KV events, by its arguments. */
typedef enum kvc_ea_events {
	KVC_EA_EVENTS_OFF = 0, /* no --kv-events-config, or it disables them */
	KVC_EA_EVENTS_ON,
	KVC_EA_EVENTS_UNKNOWN,
} kvc_ea_events;

typedef struct kvc_engine_args {
	kvc_ea_kind kind;
	char container[64]; /* the engine's container */
	kvc_ea_events events;
	kvc_ea_value dp_size; /* ranks the pod hosts */
	kvc_ea_value dp_start_rank;
	kvc_ea_value zmq_port;
	kvc_ea_value replay_port;
	kvc_ea_value block_size;
	/* kind NONE: why no engine was found; events UNKNOWN: why */
	char why[200];
} kvc_engine_args;

/* kvc_engine_args_read reads what the engine's command line in spec (a
 * pod object's "spec"; NULL or not an object reads as no engine) says.
 * container, when not NULL, names the engine's container (the annotation
 * KVC_KUBE_ANN_ENGINE_CONTAINER). Returns KVI_OK with *out filled -
 * kind KVC_EA_NONE and every value ABSENT when no engine is found - or
 * KVI_EINVAL when container names none of the pod's containers (err says
 * so; *out is then unwritten). */
kvi_err kvc_engine_args_read(const json_t *spec, const char *container,
			     kvc_engine_args *out, char *err, size_t errlen);

/* kvc_ea_kind_name names a kind: "vllm", "sglang"; NULL for none. */
const char *kvc_ea_kind_name(kvc_ea_kind k);

/* kvc_ea_events_name names a state: "enabled", "disabled", "unknown". */
const char *kvc_ea_events_name(kvc_ea_events e);

#endif /* KVI_COORDINATOR_ENGINE_ARGS_H */
