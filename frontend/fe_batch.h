/* Entity group transactions: POST /$batch (docs/table-api-spec.md §5).
 *
 * Two halves:
 *  - pure: fe_batch_parse() turns the multipart/mixed request into a list
 *    of validated operations (or says which rule failed and where), and
 *    fe_batch_write() / fe_batch_error_json() write the multipart response
 *    byte for byte as §5.3/§5.4 show it. Callable from any thread; they
 *    never read outside the buffers they are given.
 *  - glue: fe_batch_prepare() / fe_batch_finish() are the $batch operation
 *    of fe_api.c (the request's worker): one atomic FE_JOB_WRITE with every
 *    op in request order (one RPC to the range owning the PartitionKey), or
 *    one FE_JOB_GET for a batch holding a single GET.
 *
 * Request shape accepted (§5.1): outer Content-Type multipart/mixed with a
 * boundary parameter (quoted or not); the batch holds exactly one part,
 * either a changeset (multipart/mixed with its own boundary) of 1..100
 * application/http parts, or one bare application/http GET of one entity.
 * Lines may end in CRLF or bare LF; preamble and epilogue are ignored; the
 * inner request line is "VERB URL HTTP/1.x" with an absolute URL (scheme,
 * host and, path-style, the account are stripped) or a URL relative to the
 * service root; the inner query string (e.g. SAS parameters) is ignored;
 * the inner body runs to the next boundary. */
#ifndef FE_BATCH_H
#define FE_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "fe_hdr.h"
#include "fe_odata.h"
#include "fe_op.h"
#include "rt_buf.h"
#include "rt_err.h"

/* §5.2 limits. */
#define FE_BATCH_MAX_OPS 100
#define FE_BATCH_MAX_BODY (4u * 1024u * 1024u)
/* Index reported with "exceeds the maximum 100 changes" (observed on Azure
 * as 99; spec §5.4). */
#define FE_BATCH_TOO_MANY_INDEX 99

#define FE_BATCH_MSG_TOO_MANY                                          \
    "The batch request operation exceeds the maximum 100 changes per " \
    "change set."

/* One parsed operation. Strings are malloc'd and owned by the batch. */
struct fe_batch_op
{
    enum fe_op_verb verb; /* FE_OP_GET only as the batch's single part */
    int kind;             /* Rt__OpKind for writes (fe_op_kind), 0 for GET */
    char *content_id;     /* NULL when the part sent none */
    char *table;          /* decoded table name as written in the URL */
    char *pk;             /* NUL-free (checked by rt_entity_key_check) */
    char *rk;
    int if_match_any;
    uint64_t if_match; /* ticks; 0 = no condition */
    enum fe_prefer prefer;
    int atom;            /* AtomPub part (fe_hdr_atom of its Accept and
                          * Content-Type under the batch's version) */
    int has_meta;        /* the part sent a usable Accept */
    enum fe_meta meta;   /* its metadata level */
    struct rt_buf props; /* properties blob (not for DELETE / GET) */
};

struct fe_batch
{
    struct fe_batch_op *ops;
    size_t nops;
    int changeset; /* 1: a changeset of writes; 0: a single GET */
    /* Why fe_batch_parse failed: */
    int code;        /* RT_E* */
    int index;       /* -1: the request as a whole (a plain error
                      * response); >= 0: the failing operation (a 202
                      * response with one failure part, §5.4) */
    const char *msg; /* static client message, NULL = the code's own */
    char *fail_cid;  /* Content-ID of the failing part, malloc'd or NULL */
    char errmsg[RT_ERRMSG_SIZE]; /* detail for the log */
};

void fe_batch_init(struct fe_batch *b);
/* Releases everything the batch owns (safe after any parse outcome). */
void fe_batch_free(struct fe_batch *b);

/* Parses and validates a batch request body @body[0..len) (borrowed; need
 * not be NUL-terminated) sent with @content_type (the outer header, may be
 * NULL). @acct_seg is the account segment of the outer path
 * ("devstoreaccount1") used to strip and complete inner URLs. @version is
 * the batch request's x-ms-version (NULL: none sent): the operations run
 * under it, whatever x-ms-version an inner part carries. @b must be
 * initialised.
 *
 * Rules, in order (first failure wins):
 *  - request-level, b->index = -1: body over FE_BATCH_MAX_BODY (413
 *    RT_ETOOLARGE); Content-Type not multipart/mixed with a boundary,
 *    malformed or truncated multipart, a part that is neither a changeset
 *    nor application/http, more than one changeset, a changeset together
 *    with a bare request, a bare request that is not GET, an empty
 *    changeset, a malformed inner request line or header (400 RT_EINVAL);
 *  - more than FE_BATCH_MAX_OPS parts in the changeset: RT_EINVAL at
 *    FE_BATCH_TOO_MANY_INDEX with FE_BATCH_MSG_TOO_MANY;
 *  - then per operation i, in order: the verb (POST + X-HTTP-Method
 *    tunnelling: on another verb -> RT_EXMETHODPOST, a value other than
 *    MERGE/PUT/DELETE -> RT_EXMETHODVALUE; unknown -> RT_EVERB; a GET inside a
 *    changeset -> RT_EINVAL), the URL (fe_path_parse codes; RT_EURI for a
 *    resource that is not an entity or entity set; RT_EMETHOD when the verb
 *    does not fit it), the table is the first op's (case-insensitive; else
 *    RT_EDIFFPARTITIONS: another entity group), the URL keys
 *    (rt_entity_key_check), If-Match as standalone (fe_hdr_if_match: empty
 *    -> RT_EPRECOND, not a weak ETag -> RT_EINVAL, a weak ETag we could
 *    not have issued matches nothing -> 412 from the server), the
 *    operation (fe_op_kind, as standalone: missing If-Match on DELETE,
 *    or on PUT/MERGE before 2011-08-18 -> RT_EMISSINGHEADER), the
 *    body's media type and entity (an Atom entry the version takes:
 *    fe_atom_parse_entity codes; else fe_odata_parse_entity codes; an insert
 *    without keys -> RT_ENEEDVALUE; its keys checked), the PartitionKey is
 *    the first op's (RT_EDIFFPARTITIONS), the (PK, RK) pair is new
 *    (RT_EDUPROW).
 * Returns 0 (b->ops/nops filled) or the failing code (b->code, index, msg,
 * fail_cid, errmsg filled; ops may hold a prefix and must still be freed
 * with fe_batch_free). */
int fe_batch_parse(const char *content_type,
                   const char *acct_seg,
                   const char *version,
                   const uint8_t *body,
                   size_t len,
                   struct fe_batch *b);

/* One part of a batch response. Everything is borrowed for the call. */
struct fe_batch_part
{
    int status;
    const char *content_id;         /* NULL: no Content-ID line */
    const char *preference_applied; /* NULL: none */
    const char *location;           /* Location and DataServiceId; NULL */
    const char *etag;               /* NULL: no ETag line */
    const char *content_type;       /* the body's; NULL: no body */
    const char *dsv;                /* DataServiceVersion; NULL: "3.0;" */
    const uint8_t *body;
    size_t body_len;
};

/* Appends the multipart/mixed response body (§5.3/§5.4) to @out: parts
 * delimited by "--batchresponse_@batch_id"; when @changeset_id is not NULL
 * they sit in one nested "changesetresponse_@changeset_id" part, else
 * directly in the batch (the single-GET form). Lines end in CRLF; header
 * order per part: Content-ID, X-Content-Type-Options, Cache-Control,
 * Preference-Applied, DataServiceVersion, Content-Type, Location,
 * DataServiceId, ETag. */
void fe_batch_write(struct rt_buf *out,
                    const char *batch_id,
                    const char *changeset_id,
                    const struct fe_batch_part *parts,
                    size_t n);

/* Appends the error body of a failure part, JSON or (@atom) the AtomPub
 * dataservices-metadata <error> with the same message:
 * {"odata.error":{"code":..,"message":{"lang":"en-US","value":
 *  "<index>:<msg>\nRequestId:<reqid>\nTime:<when>"}}}
 * @msg NULL = the code's default message. */
void fe_batch_error_json(struct rt_buf *out,
                         int atom,
                         int code,
                         int index,
                         const char *msg,
                         const char *reqid,
                         const char *when);

/* The $batch operation (fe_api.c dispatch; the request's worker).
 * prepare: returns FE_API_RESPOND with the response set (request-level
 * error, or a 202 failure for a rule an operation broke), or FE_API_SUBMIT
 * with req->job set. What finish needs besides the job (Content-IDs,
 * Prefer, Accept per op; the table name, GET keys) is kept in the request's
 * scratch buffers req->s1 (strings) and req->s2 (per-op records), which the
 * request owns and frees. finish: the 202 multipart response from the job,
 * or a plain error for failures no operation can be blamed for (5xx). */
struct fe_req;
int fe_batch_prepare(struct fe_req *req);
void fe_batch_finish(struct fe_req *req);

#endif
