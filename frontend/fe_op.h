/* Entity operations: the one table that says which write (or read) a
 * request on an entity performs, from its verb, whether it sent If-Match
 * and the x-ms-version in force (docs/table-api-spec.md §1.3,
 * §3.11-§3.15, §10). Single requests (fe_api.c), every operation of a
 * $batch change set (fe_batch.c) and the SAS permission check (fe_sas.c)
 * all ask it, so they cannot disagree.
 *
 * Pure: any thread, no state, nothing allocated. */
#ifndef FE_OP_H
#define FE_OP_H

#include <stddef.h>

/* The verbs of entity requests (after X-HTTP-Method tunnelling). */
enum fe_op_verb {
    FE_OP_INSERT, /* POST to the entity set: Insert Entity */
    FE_OP_PUT,    /* Update Entity (If-Match) / Insert Or Replace */
    FE_OP_MERGE,  /* MERGE or PATCH: Merge Entity / Insert Or Merge */
    FE_OP_DELETE, /* Delete Entity, If-Match required */
    FE_OP_GET,    /* Get Entity */
    FE_OP__NR
};

/* The kind fe_op_kind reports for FE_OP_GET (Rt__OpKind has no read). */
#define FE_OP_KIND_READ 100

/* The verb of method @m[0..n) (exact case; MERGE and PATCH are one), or
 * -1 when it is none of POST, PUT, MERGE, PATCH, DELETE, GET. */
int fe_op_verb_of(const char *m, size_t n);

/* The operation @verb performs, with (@if_match != 0) or without an
 * If-Match header, under x-ms-version @version (NULL: the client sent
 * none, the current rules apply):
 *   POST -> OP_INSERT; GET -> FE_OP_KIND_READ;
 *   PUT -> OP_REPLACE with If-Match, else OP_UPSERT_REPLACE;
 *   MERGE -> OP_MERGE with If-Match, else OP_UPSERT_MERGE;
 *   DELETE -> OP_DELETE.
 * *kind (an Rt__OpKind or FE_OP_KIND_READ) is set for every verb, also
 * when the request is refused: a SAS permission check needs it first.
 * Returns 0, or RT_EMISSINGHEADER (400) for DELETE without If-Match
 * (documented as required, spec §3.14) and for PUT/MERGE without If-Match
 * before 2011-08-18, which has no Insert Or Replace/Merge (spec §3.12,
 * §10). The If-Match value itself is checked by fe_hdr_if_match. */
int fe_op_kind(enum fe_op_verb verb,
               int if_match,
               const char *version,
               int *kind);

#endif
