/* Status snapshot: the documents the HTTP thread serves (GET /api/status
 * JSON and GET /metrics Prometheus text), built on the loop thread and
 * handed over under a mutex. The HTTP thread only ever copies them, so it
 * never touches loop-thread state.
 *
 * Thread: ms_status_publish() and the builders from the loop thread,
 * ms_status_copy() from any thread; create/destroy from the owner when no
 * other thread uses it. */
#ifndef MS_STATUS_H
#define MS_STATUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ms_balance;
struct ms_cluster;
struct ms_repl;
struct ms_status;

enum ms_status_doc {
    MS_STATUS_JSON,           /* GET /api/status */
    MS_STATUS_METRICS,        /* GET /metrics */
    MS_STATUS_HISTORY,        /* GET /api/history (rebuilt once a second) */
    MS_STATUS_HISTORY_COARSE, /* GET /api/history?res=10 (every 10 s) */
    MS_STATUS__NR
};

struct ms_status *ms_status_create(void);
void ms_status_destroy(struct ms_status *st);
/* Replaces the documents; takes @json and @metrics (malloc'd) on every
 * path. */
void ms_status_publish(struct ms_status *st, char *json, char *metrics);
/* Replaces one document; takes @text (malloc'd) on every path. */
void ms_status_publish_doc(struct ms_status *st,
                           enum ms_status_doc doc,
                           char *text);
/* A malloc'd copy of one document (caller frees), or NULL when nothing has
 * been published yet. */
char *ms_status_copy(struct ms_status *st, enum ms_status_doc doc);

/* The member's role for the HTTP thread (docs/DESIGN-master-ha.md §5.2):
 * a member that is not the acting leader answers 307 to @leader_http
 * ("host:port", copied; NULL or "" = no leader known: 503). A new status
 * acts (alone). */
void ms_status_set_role(struct ms_status *st,
                        bool acting,
                        const char *leader_http);
/* true when acting; else *@leader_http is a malloc'd copy or NULL. */
bool ms_status_role(struct ms_status *st, char **leader_http);
/* The replicated master's parts of the documents (takes both, malloc'd or
 * NULL): @masters_json, a JSON array, appears in MS_STATUS_JSON as
 * "masters"; @metrics_extra is appended to MS_STATUS_METRICS. */
void ms_status_set_members(struct ms_status *st,
                           char *masters_json,
                           char *metrics_extra);

/* Builds both documents from the cluster state, the balancer and the
 * replication glue (loop thread; all borrowed; @repl may be NULL). The
 * shape of the JSON is in master/README.md ("HTTP API"). Returns malloc'd
 * strings. */
void ms_status_build(struct ms_cluster *cl,
                     struct ms_balance *bal,
                     struct ms_repl *repl,
                     char **json,
                     char **metrics);
/* The JSON text of history frames already serialized, by frame number: a
 * frame never changes once recorded, so each is serialized once, not at
 * every rebuild (an hour of 10 s frames of 1,000 ranges took seconds of
 * the loop thread to build whole; one frame takes milliseconds). Embed it
 * zeroed, one per ring; ms_status_hist_cache_free() releases it. Loop
 * thread only. */
struct ms_status_hist_cache
{
    uint64_t *n; /* frame number held by each slot (0: none) */
    char **text;
    size_t cap; /* slots (the ring's length), set at first use */
};
void ms_status_hist_cache_free(struct ms_status_hist_cache *c);

/* The load history document (master/README.md, GET /api/history): the
 * 1 s frames, or with @coarse the 10 s ones (GET /api/history?res=10).
 * @cache (may be NULL: serialize everything) keeps the frames' text for
 * the next call; use one cache per ring. Returns malloc'd text. */
char *ms_status_build_history(struct ms_cluster *cl,
                              struct ms_balance *bal,
                              bool coarse,
                              struct ms_status_hist_cache *cache);

#endif
