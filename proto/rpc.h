/*
 * rpc.h - the coordinator -> shard request/reply transport: message
 * envelopes and the client.
 *
 * Envelope. Every message is a kvindex.Request or kvindex.Response
 * (kvindex.proto) packed by protobuf-c. Its `version` is read before
 * anything else, straight from the wire (kvp_envelope_version), so a message
 * of another protocol version is reported as KVI_EVERSION with both version
 * numbers even when the rest of it would not parse under this build's
 * schema. A message is at most KVP_MSG_MAX bytes, in both directions.
 *
 * Client. A kvp_client is one nng req0 socket dialed to one shard URL.
 * The dial is non-blocking and nng redials by itself (every
 * KVP_RECONNECT_MIN_MS, backing off to KVP_RECONNECT_MAX_MS), so a client can
 * be opened while its shard is down and reaches it once it is up. Each call
 * runs on its own nng context, so any number of threads may call at once.
 * Every call has a deadline and never outlives it: a request waits for a
 * connection, is sent, and its reply awaited, all within timeout_ms. nng's
 * automatic resend of requests is disabled: a request is sent at most once,
 * since assign and unassign are not idempotent; a caller that wants to retry
 * decides so itself.
 *
 * Threading and ownership: kvp_call blocks its caller; kvp_call_async runs
 * its callback on an nng thread, where it must not block for long (it
 * delays nng's other completions). A Response handed out is the caller's,
 * freed with kvindex__response__free_unpacked(resp, NULL).
 */
#ifndef KVI_PROTO_RPC_H
#define KVI_PROTO_RPC_H

#include <nng/nng.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "kvindex.pb-c.h"

/* The protocol version this build speaks. */
#define KVP_VERSION KVINDEX__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT

/* The largest message accepted, in either direction (64 MiB). */
#define KVP_MSG_MAX ((size_t)64 << 20)

#define KVP_RECONNECT_MIN_MS 50
#define KVP_RECONNECT_MAX_MS 500

/* kvp_err_from_nng translates an nng error number: timeouts, closed
 * objects, lost connections and bad addresses to their kvi_err, anything
 * else to KVI_EIO. NNG_ENOMEM aborts, like every allocation. */
kvi_err kvp_err_from_nng(int nng_rv);

/*
 * Envelope helpers. Pure functions over bytes (and nng messages as
 * buffers); no I/O.
 */

/* kvp_envelope_version reads the version (field 1) of a packed Request or
 * Response without decoding the other fields. Returns KVI_EPROTO when the
 * bytes are not a well-formed sequence of protobuf fields or carry no
 * version. */
kvi_err kvp_envelope_version(const void *buf, size_t len, uint32_t *out);

/* kvp_version_check returns KVI_OK when peer is KVP_VERSION, else
 * KVI_EVERSION with "peer speaks protocol version P, this build speaks V"
 * in err (which may be NULL). */
kvi_err kvp_version_check(uint32_t peer, char *err, size_t errlen);

/*
 * Authentication. A cluster may share a secret (--rpc-secret-file): every
 * request a process sends then carries it, and a shard refuses a request
 * that does not (KVI_EAUTH) before anything else, the leadership term
 * included. The secret travels in the clear, so it keeps out whoever can
 * reach a shard's port but not read the cluster's traffic; it is compared
 * in constant time.
 */

/* kvp_secret_set makes secret (copied; NULL or "": none) the one this
 * process sends and requires. Call once at start, before any client or
 * service exists. */
void kvp_secret_set(const char *secret);

/* The longest secret, in bytes. */
#define KVP_SECRET_MAX 4096

/* kvp_secret_load reads the secret from the file at path
 * (kvi_secret_read) and sets it; err says why it could not. */
kvi_err kvp_secret_load(const char *path, char *err, size_t errlen);

/* kvp_request_authentic says whether req carries the secret (always true
 * without one). */
bool kvp_request_authentic(const Kvindex__Request *req);

/* kvp_request_pack packs req into a new nng message, setting the version to
 * KVP_VERSION when req's is 0 (req itself is not modified). Returns
 * KVI_EINVAL when req has no body or lacks a required field, KVI_ETOOBIG
 * when it packs to more than KVP_MSG_MAX bytes. *out is the caller's. */
kvi_err kvp_request_pack(const Kvindex__Request *req, nng_msg **out, char *err,
			 size_t errlen);

/* kvp_request_unpack decodes a request, taking memory from alloc (NULL: the
 * system allocator). Returns KVI_EVERSION when its version is not
 * KVP_VERSION, KVI_EPROTO when it does not decode; *out is written only on
 * success. */
kvi_err kvp_request_unpack(const void *buf, size_t len,
			   ProtobufCAllocator *alloc, Kvindex__Request **out,
			   char *err, size_t errlen);

/* kvp_response_pack packs resp (whose version must be set) into a new nng
 * message. Returns KVI_EINVAL when resp lacks a required field, KVI_ETOOBIG
 * when it packs to more than KVP_MSG_MAX bytes. */
kvi_err kvp_response_pack(const Kvindex__Response *resp, nng_msg **out,
			  char *err, size_t errlen);

/* kvp_response_unpack decodes a response into a new message, to be freed
 * with kvindex__response__free_unpacked(*out, NULL). Returns KVI_EVERSION or
 * KVI_EPROTO like kvp_request_unpack; *out is written only on success. */
kvi_err kvp_response_unpack(const void *buf, size_t len,
			    Kvindex__Response **out, char *err, size_t errlen);

/* kvp_reply_decode decodes the bytes of a reply from url and returns the
 * call's outcome as kvp_call does (KVI_EVERSION, KVI_EPROTO, or the
 * response's own code, err saying why). *out is the response whenever one
 * decoded, even with an error code, else NULL; the caller frees it. */
kvi_err kvp_reply_decode(const void *buf, size_t len, const char *url,
			 Kvindex__Response **out, char *err, size_t errlen);

/*
 * Client.
 */

typedef struct kvp_client kvp_client;

/* kvp_call_done is told the outcome of one kvp_call_async: rv as kvp_call
 * returns it, resp (NULL unless a valid response arrived; then owned by the
 * callee, who frees it) and err, a message that is "" on success and valid
 * only during the call. */
typedef void (*kvp_call_done)(void *arg, kvi_err rv, Kvindex__Response *resp,
			      const char *err);

/* kvp_client_open creates a client for the shard at url (e.g.
 * "tcp://10.0.0.7:7001") and starts dialing it in the background. Returns
 * KVI_EINVAL for a URL nng does not accept. */
kvi_err kvp_client_open(const char *url, kvp_client **out);

/* kvp_client_close aborts the calls in flight (they end with KVI_ECLOSED),
 * waits until every callback of kvp_call_async has returned, and frees c.
 * No call may start once close has begun, and close must not be called from
 * a kvp_call_done callback. NULL is a no-op. */
void kvp_client_close(kvp_client *c);

/* kvp_client_url returns the URL c dials. */
const char *kvp_client_url(const kvp_client *c);

/* kvp_client_idle_calls returns how many finished calls c keeps, each with
 * its nng context and aio, for the next calls to reuse: a call answered is
 * kept (up to 64), one that failed is not. */
unsigned kvp_client_idle_calls(kvp_client *c);

/* kvp_call sends req and waits at most timeout_ms (> 0) for the reply.
 * Returns:
 *   KVI_ETIMEDOUT     no reply in time (shard down, unreachable or slow);
 *   KVI_EUNREACHABLE  the connection was lost after the request was sent;
 *   KVI_EVERSION      the reply speaks another protocol version;
 *   KVI_EPROTO        the reply does not decode, or carries an unknown code;
 *   KVI_EINVAL        req is invalid (not sent) or timeout_ms <= 0;
 *   KVI_ECLOSED       the client is being closed;
 *   otherwise the response's own code, KVI_OK included.
 * *resp is set to the response whenever a valid one arrived, even when its
 * code is an error, and to NULL otherwise; the caller frees it with
 * kvindex__response__free_unpacked(*resp, NULL). err (may be NULL) receives
 * the response's error message or a description of the failure, "" on
 * success. req->version 0 is sent as KVP_VERSION. */
kvi_err kvp_call(kvp_client *c, const Kvindex__Request *req, int timeout_ms,
		 Kvindex__Response **resp, char *err, size_t errlen);

/* kvp_call_async starts the same call without waiting; req is packed
 * before it returns and may be freed then. On KVI_OK, done(arg, ...) runs
 * exactly once, on an nng thread, no later than about timeout_ms from now.
 * On an error (KVI_EINVAL, KVI_ECLOSED) nothing was sent and done is never
 * called. For a fan-out to several shards under one deadline, start one
 * call per shard with the same timeout. */
kvi_err kvp_call_async(kvp_client *c, const Kvindex__Request *req,
		       int timeout_ms, kvp_call_done done, void *arg);

#endif /* KVI_PROTO_RPC_H */
