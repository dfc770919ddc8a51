/*
 * pod.h - what the coordinator knows of an engine pod before it becomes
 * listeners, and how a pod becomes listeners.
 *
 * Every discovery source (the static file, HTTP /register, Kubernetes)
 * produces kvc_pod values. A pod is either named (file, Kubernetes, the
 * per-pod HTTP form): an ip, a zmq_port, a dp_size and a dp_start_rank S,
 * expanded into one listener per rank r of S..S+dp_size-1 at
 * tcp://ip:zmq_port+r, http://ip:recover_port+r and tcp://ip:replay_port+r
 * (docs/design.md#identity-and-validation,
 * docs/design.md#discovery-and-registration); or a single rank registered with
 * explicit endpoints (the per-rank HTTP form), whose instance id the caller
 * gives.
 *
 * Ranks are global. One data-parallel group may span several pods (vLLM's
 * --data-parallel-size N, --data-parallel-size-local L,
 * --data-parallel-start-rank S): such a pod hosts ranks S..S+L-1, each
 * publishing with its global rank in its batches and on the port its
 * global rank offsets (vllm/distributed/kv_events.py,
 * ZmqEventPublisher.offset_endpoint_port, given the engine's
 * data_parallel_rank), so the pod is described with dp_size L and
 * dp_start_rank S and its listeners are keyed and answered by global
 * rank.
 *
 * Identity: a named pod's instance id is the first 53 bits of XXH3 of its
 * name, so it is stable across restarts and exact as a JSON number; its
 * listener keys are "name#rank". A per-rank registration's keys are
 * "instance_id#rank".
 *
 * Validation never truncates: dp_size is 1..65536, a rank must fit in a
 * u16, ports plus ranks must stay below 65536, and each failure has a
 * message that says which value was wrong.
 */
#ifndef KVI_COORDINATOR_POD_H
#define KVI_COORDINATOR_POD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define KVC_DP_SIZE_MAX 65536u /* the wire's: a rank is a u16 */
/* What --max-dp-size is unless given: about three times the widest data
 * parallelism served today (a few hundred ranks, wide expert-parallel
 * decoding), while a registration that names many more by mistake costs
 * at most this many listeners, sockets and probes. */
#define KVC_MAX_DP_SIZE_DEFAULT 1024u
#define KVC_NAME_MAX            253 /* a Kubernetes namespace/name fits */

typedef enum kvc_source {
	KVC_SOURCE_FILE = 0,
	KVC_SOURCE_HTTP,
	KVC_SOURCE_KUBERNETES,
} kvc_source;
#define KVC_SOURCES 3

/* Where a named pod's setting came from, for /workers only. It is not
 * part of what the pod is: kvc_pod_equal ignores it, so a change of
 * origin alone (an annotation added that agrees with the engine's
 * arguments) changes no listener and /workers keeps the origin the pod
 * was registered with; and a pod's record does not keep it, so a stored
 * registration comes back as KVC_FROM_SOURCE. */
typedef enum kvc_from {
	KVC_FROM_SOURCE = 0,  /* the file's entry or the registration */
	KVC_FROM_DEFAULT,     /* the coordinator's flag, or 0 */
	KVC_FROM_ANNOTATION,  /* a kvindex.io/ annotation of the pod */
	KVC_FROM_ENGINE_ARGS, /* the engine's command line in the pod spec */
} kvc_from;

/* The settings whose origin a pod keeps (kvc_pod.origin.from). */
typedef enum kvc_setting {
	KVC_SET_DP_SIZE = 0,
	KVC_SET_DP_START_RANK,
	KVC_SET_ZMQ_PORT,
	KVC_SET_REPLAY_PORT,
	KVC_SET_BLOCK_SIZE,
} kvc_setting;
#define KVC_SETTINGS 5

/* Where a pod's settings came from and, for a Kubernetes pod, what its
 * engine's command line says (discovery/engine_args.h). No heap: a copy
 * of the pod copies it. */
typedef struct kvc_pod_origin {
	uint8_t from[KVC_SETTINGS]; /* kvc_from, by kvc_setting */
	const char *engine;    /* static "vllm", "sglang"; NULL: none read */
	const char *kv_events; /* static "enabled", "disabled", "unknown" */
	char container[64];    /* the engine's container */
} kvc_pod_origin;

/* A discovered pod, or one explicitly registered rank. Strings owned. */
typedef struct kvc_pod {
	kvc_source source;
	char *name;           /* "ns/pod"; NULL for a per-rank registration */
	uint64_t instance_id; /* derived from name, or given */
	char *model;
	uint32_t block_size;
	/* named pods */
	char *ip;
	uint32_t zmq_port;
	bool has_recover_port, has_replay_port;
	uint32_t recover_port, replay_port;
	uint32_t dp_size;       /* ranks this pod hosts */
	uint32_t dp_start_rank; /* the global rank of the first; 0 */
	/* the engine's Prometheus endpoint, http://ip:metrics_port/metrics,
	 * one for the pod, its ranks told apart by the label "engine": what
	 * the routing ladder reads the engines' own hits from */
	bool has_metrics_port;
	uint32_t metrics_port;
	/* per-rank registrations */
	uint32_t rank;
	char *endpoint, *replay_endpoint, *recover_endpoint;
	kvc_pod_origin origin; /* named pods */
} kvc_pod;

/* One rank of a pod, ready to hand to a shard. Strings owned. */
typedef struct kvc_rank {
	char *key;
	uint16_t rank;
	char *endpoint;
	char *replay_endpoint;  /* NULL: none */
	char *recover_endpoint; /* NULL: none */
} kvc_rank;

/* kvc_instance_id returns the instance id of a named pod. */
uint64_t kvc_instance_id(const char *name);

/* kvc_pod_check validates p (a named pod or a single rank); on error err
 * says which field and value were wrong. KVI_EINVAL or KVI_ERANGE. */
kvi_err kvc_pod_check(const kvc_pod *p, char *err, size_t errlen);

/* kvc_pod_ranks expands a valid pod into its ranks: dp_size of them for a
 * named pod, one for a per-rank registration. The caller frees them with
 * kvc_ranks_free(). */
kvc_rank *kvc_pod_ranks(const kvc_pod *p, size_t *n);
void kvc_ranks_free(kvc_rank *r, size_t n);

/* kvc_pod_metrics_url returns the pod's engine metrics URL (kvi_free),
 * or NULL when it names no metrics port. */
char *kvc_pod_metrics_url(const kvc_pod *p);

/* kvc_pod_copy makes a deep copy; kvc_pod_fini frees what p owns. */
void kvc_pod_copy(kvc_pod *dst, const kvc_pod *src);
void kvc_pod_fini(kvc_pod *p);

/* kvc_pod_equal says whether two pods would produce the same listeners
 * (source and origin aside). */
bool kvc_pod_equal(const kvc_pod *a, const kvc_pod *b);

const char *kvc_source_name(kvc_source s);

/* kvc_pod_origin_given sets the origin of a pod of the file or a
 * registration: what it gives is KVC_FROM_SOURCE; a dp_size (has_dp
 * false), a start rank and a replay port it leaves out are
 * KVC_FROM_DEFAULT. */
void kvc_pod_origin_given(kvc_pod *p, bool has_dp, bool has_start);

/* kvc_from_name names where a setting of a pod of source s came from:
 * "default", "annotation", "engine_args", or for KVC_FROM_SOURCE "file",
 * "registration" or "kubernetes". */
const char *kvc_from_name(kvc_from f, kvc_source s);

/*
 * A pod's record (pod_record.c): how the coordinator's store keeps an
 * HTTP registration, and how replicas share one through the Lease. The
 * value is [xxh32 of the rest, LE][rest], the rest a versioned binary
 * record, all integers little-endian:
 *
 *   u8 version (1), u8 source, u8 flags (1 has_recover_port,
 *   2 has_replay_port, 4 has_metrics_port, 8 a dp_start_rank other than
 *   0), u64 instance_id, u32 block_size, zmq_port,
 *   recover_port, replay_port, dp_size, rank, then six strings - name,
 *   model, ip, endpoint, replay_endpoint, recover_endpoint - each a u32
 *   length (0xffffffff for NULL) and that many bytes, with no NUL inside;
 *   then u32 metrics_port with flag 4, then u32 dp_start_rank with flag
 *   8; nothing may follow.
 *
 * Binary rather than JSON so that decoding is exact and bounded: a value
 * either is a well-formed record of this version or is KVI_ECORRUPT. The
 * decoder checks structure only, not kvc_pod_check(), so a stricter check
 * in a later version does not turn a stored pod into "corruption"; callers
 * re-validate what they load.
 */

/* The longest endpoint or other string a record holds. */
#define KVC_POD_STR_MAX 4096

/* kvc_pod_key writes p's key (its name, or "instance_id#rank": the prefix
 * of its listener keys) into buf and returns buf, or NULL when it does
 * not fit in len. */
char *kvc_pod_key(const kvc_pod *p, char *buf, size_t len);

/* kvc_pod_encode returns p's record (checksum included) in a buffer the
 * caller frees with kvi_free(); *len receives its size. Returns NULL when
 * a string of p is longer than KVC_POD_STR_MAX. */
uint8_t *kvc_pod_encode(const kvc_pod *p, size_t *len);

/* kvc_pod_read decodes a record past its checksum (len bytes at rest,
 * verified already) as kvc_pod_decode does. */
kvi_err kvc_pod_read(const void *rest, size_t len, kvc_pod *out, char *err,
		     size_t errlen);

/* kvc_pod_decode decodes a record into *out, which the caller finishes
 * with kvc_pod_fini(). Returns KVI_ECORRUPT (err says why) for a bad
 * checksum or a malformed value, KVI_EVERSION for an unknown record
 * version; *out is written only on success. */
kvi_err kvc_pod_decode(const void *val, size_t len, kvc_pod *out, char *err,
		       size_t errlen);

#endif /* KVI_COORDINATOR_POD_H */
