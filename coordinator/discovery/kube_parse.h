/*
 * kube_parse.h - the Kubernetes pod list and watch formats
 * (docs/wire.md#kubernetes-pod-watch), parsed without I/O: bytes in, values
 * out.
 *
 * Three parsers, each testable and fuzzable on its own:
 *
 *  - kvc_kube_pod_parse() turns one pod object into what the watcher needs:
 *    its "namespace/name", uid, IP, whether it is Ready and whether it is
 *    terminating, and - when its labels and annotations say enough - the
 *    kvc_pod it becomes (source KVC_SOURCE_KUBERNETES). A pod whose
 *    annotations are wrong is still parsed (so its deletion is seen), with
 *    the reason it cannot be registered.
 *  - kvc_kube_list_parse() reads one page of a PodList: its items, its
 *    metadata.resourceVersion and its continue token. An API "Status"
 *    object (an error answer) is recognised and reported with its code.
 *  - kvc_kube_stream feeds the bytes of a watch response, cut anywhere by
 *    the transport, and calls back once per complete line: one event,
 *    {"type", "object"}. A line longer than KVC_KUBE_LINE_MAX is an error
 *    (the stream is then unusable: the caller drops the connection).
 *
 * Per-pod settings. What the coordinator's --watch-* flags give every pod
 * is overridden by what the engine's own command line in the pod's spec
 * says (engine_args.h: the data-parallel ranks, the KV events' ports, the
 * block size), and both by annotations on the pod, so one coordinator
 * serves engines of different models and data-parallel sizes:
 *
 *   kvindex.io/dp-size       data-parallel ranks (1..--max-dp-size)
 *   kvindex.io/dp-start-rank global rank of the pod's first rank
 *   kvindex.io/zmq-port      event port of rank 0 (rank r: +r)
 *   kvindex.io/replay-port   replay port of rank 0
 *   kvindex.io/recover-port  /kv_recover HTTP port of rank 0
 *   kvindex.io/metrics-port  the engine's Prometheus port (one per pod)
 *   kvindex.io/block-size    tokens per KV block
 *   kvindex.io/model         the model name (else the --watch-model-label
 *                            label)
 *   kvindex.io/engine-container  the container whose command line is read
 *
 * Annotation values are decimal integers written plainly ("2", not "+2",
 * "2.0" or " 2"); a value that is not, or is out of range, makes the pod
 * unregistrable with a message naming the annotation and value - never
 * truncated, never silently replaced by the default. So does an
 * annotation that disagrees with the engine's arguments (the message
 * names both), and a value the arguments leave to the container's start
 * ($DP in a shell script) with no annotation to give it. Where each value
 * came from is kept in the pod's origin (pod.h), for /workers.
 */
#ifndef KVI_COORDINATOR_KUBE_PARSE_H
#define KVI_COORDINATOR_KUBE_PARSE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "pod.h"

#define KVC_KUBE_ANN_DP_SIZE "kvindex.io/dp-size"
/* the global rank of the pod's first rank, when one data-parallel group
 * spans several pods (vLLM's --data-parallel-start-rank); 0 unless given
 * (by it or the engine's arguments) */
#define KVC_KUBE_ANN_DP_START_RANK "kvindex.io/dp-start-rank"
#define KVC_KUBE_ANN_ZMQ_PORT      "kvindex.io/zmq-port"
#define KVC_KUBE_ANN_REPLAY_PORT   "kvindex.io/replay-port"
#define KVC_KUBE_ANN_RECOVER_PORT  "kvindex.io/recover-port"
#define KVC_KUBE_ANN_METRICS_PORT  "kvindex.io/metrics-port"
#define KVC_KUBE_ANN_BLOCK_SIZE    "kvindex.io/block-size"
#define KVC_KUBE_ANN_MODEL         "kvindex.io/model"

/* The longest watch event line accepted (a pod object is a few KiB). */
#define KVC_KUBE_LINE_MAX ((size_t)4 << 20)

/* What every watched pod gets unless its annotations say otherwise. */
typedef struct kvc_kube_defaults {
	uint32_t zmq_port;
	bool has_replay_port, has_recover_port;
	uint32_t replay_port, recover_port;
	uint32_t dp_size;
	uint32_t block_size;
	const char *model_label; /* label naming the model */
} kvc_kube_defaults;

/* One pod as the watcher keeps it. Strings owned; kvc_kube_pod_fini(). */
typedef struct kvc_kube_pod {
	char *key; /* "namespace/name" */
	char *uid;
	char *ip; /* NULL until it has one */
	uint64_t rv;
	bool ready;
	bool terminating;
	bool valid;    /* pod below is filled in */
	kvc_pod pod;   /* when valid */
	char why[200]; /* when !valid: why it cannot be registered */
} kvc_kube_pod;

/* kvc_kube_pod_parse parses one pod object. Returns KVI_EPROTO (err says
 * what) when obj is not a pod object with metadata.name and
 * metadata.namespace; a pod that lacks a model or has a bad annotation
 * is KVI_OK with out->valid false and out->why set. */
kvi_err kvc_kube_pod_parse(const json_t *obj, const kvc_kube_defaults *d,
			   kvc_kube_pod *out, char *err, size_t errlen);

/* kvc_kube_pod_fini frees what p owns; a zeroed p is fine. */
void kvc_kube_pod_fini(kvc_kube_pod *p);

/* kvc_kube_pod_move moves src into dst (dst's old content is freed). */
void kvc_kube_pod_move(kvc_kube_pod *dst, kvc_kube_pod *src);

/* An API Status object (an error answer), as far as it is readable. */
typedef struct kvc_kube_status {
	int code;        /* 0 when absent */
	char reason[64]; /* "Expired", "Unauthorized", ... */
	char message[256];
} kvc_kube_status;

/* kvc_kube_status_parse reads a Status object from obj; false when obj is
 * not one. */
bool kvc_kube_status_parse(const json_t *obj, kvc_kube_status *out);

/* One page of a pod list. Owned by the caller; kvc_kube_list_fini(). */
typedef struct kvc_kube_list {
	kvc_kube_pod *pods;
	size_t n_pods;
	size_t n_skipped; /* items that were not pod objects */
	uint64_t rv;
	char *cont; /* continue token, NULL on the last page */
} kvc_kube_list;

/* kvc_kube_list_parse parses one page of a PodList of len bytes. Returns
 * KVI_EPROTO when data is not a PodList (a Status is reported in *status
 * when status is non-NULL and the code is set), with err saying why. */
kvi_err kvc_kube_list_parse(const void *data, size_t len,
			    const kvc_kube_defaults *d, kvc_kube_list *out,
			    kvc_kube_status *status, char *err, size_t errlen);
void kvc_kube_list_fini(kvc_kube_list *l);

/* The type of a watch event. */
typedef enum kvc_kube_ev {
	KVC_KUBE_ADDED,
	KVC_KUBE_MODIFIED,
	KVC_KUBE_DELETED,
	KVC_KUBE_BOOKMARK,
	KVC_KUBE_ERROR,
} kvc_kube_ev;

/* A watch event handed to the stream's callback; object is borrowed for
 * the call. Returning false stops the stream (kvc_kube_stream_feed then
 * returns KVI_ECLOSED). */
typedef bool (*kvc_kube_event_fn)(void *arg, kvc_kube_ev type,
				  const json_t *object);

typedef struct kvc_kube_stream kvc_kube_stream;

kvc_kube_stream *kvc_kube_stream_alloc(kvc_kube_event_fn fn, void *arg);
void kvc_kube_stream_free(kvc_kube_stream *s);

/* kvc_kube_stream_reset forgets any partial line (a new connection). */
void kvc_kube_stream_reset(kvc_kube_stream *s);

/* kvc_kube_stream_feed consumes len bytes and calls back for each
 * complete event line; blank lines are skipped. Returns KVI_EPROTO (err
 * says where) for a line that is not JSON, not an object, or has an
 * unknown type or no object, KVI_ETOOBIG for a line over
 * KVC_KUBE_LINE_MAX, KVI_ECLOSED when the callback stopped it. After an
 * error the stream must be reset before it is fed again. */
kvi_err kvc_kube_stream_feed(kvc_kube_stream *s, const void *data, size_t len,
			     char *err, size_t errlen);

/* kvc_kube_stream_pending says how many bytes of a partial line it holds
 * (a stream that ends with some was cut mid-event). */
size_t kvc_kube_stream_pending(const kvc_kube_stream *s);

#endif /* KVI_COORDINATOR_KUBE_PARSE_H */
