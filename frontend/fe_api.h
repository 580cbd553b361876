/* The Table REST operations (docs/table-api-spec.md §3): validation,
 * authentication and the order of checks, dispatch to one operation, and
 * the response from a finished job. fe_api.c holds the OData table and
 * entity operations; the $batch (fe_batch.h) and the storage-XML ones
 * (fe_svc.h) plug into the same dispatch table.
 *
 * Thread: the request's worker. Input: a request a transport filled
 * (fe_req.h); nothing here knows the HTTP library, so unit tests drive it
 * with requests built by hand. */
#ifndef FE_API_H
#define FE_API_H

#include "fe_req.h"

/* Validates, authenticates and dispatches @req. Returns FE_API_RESPOND
 * (req->status, hdrs and rbody set) or FE_API_SUBMIT (req->job set; run
 * it, then call fe_api_finish). */
int fe_api_prepare(struct fe_req *req);
/* Builds the response from the finished req->job (RT_ECANCELED: 503
 * ServerBusy, the server is shutting down). */
void fe_api_finish(struct fe_req *req);
/* Releases what fe_api_prepare allocated in @req (safe to call twice). */
void fe_api_req_free(struct fe_req *req);
/* The name of the Table API operation @req was routed to ("InsertEntity",
 * "EntityGroupTransaction", ...), also when authentication refused it
 * (the operation its path and verb name), or NULL when it was answered
 * before one was known (malformed, unknown resource, OPTIONS). Metrics
 * label it. */
const char *fe_api_op_name(const struct fe_req *req);

#endif
