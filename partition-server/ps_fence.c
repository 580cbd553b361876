/* Master-term fencing (ps_fence.h; docs/DESIGN-master-ha.md §5.4).
 *
 * Happy path: a request from the current master carries the highest term
 * (or a higher one, after a new master took over: recorded here, persisted
 * by the next META job). Failure mode: a deposed master's request carries
 * a lower term: refused with RT_ESTALE before its handler looks at it, so
 * it changes nothing; the deposed master sees the error and the new one
 * is unaffected. A master that does not send the field (0) is taken as
 * before fencing existed. */
#include "ps_fence.h"

#include <inttypes.h>
#include <stdio.h>

#include "rt.pb-c.h"
#include "rt_err.h"
#include "rt_log.h"

int ps_fence_check(struct ps_server *ps, uint64_t term, const char *what)
{
    if (term == 0) {
        return 0;
    }
    if (term < ps->master_term) {
        ps->master_term_refused++;
        rt_log(RT_LOG_WARN,
               "refusing %s of master term %" PRIu64 " < %" PRIu64
               " (a deposed master)",
               what, term, ps->master_term);
        return RT_ESTALE;
    }
    if (term > ps->master_term) {
        if (ps->master_term != 0) {
            rt_log(RT_LOG_INFO, "master term %" PRIu64 " -> %" PRIu64 " (%s)",
                   ps->master_term, term, what);
        }
        ps->master_term = term;
    }
    return 0;
}

int ps_fence_admit(struct ps_server *ps,
                   struct rt_rpc_conn *conn,
                   uint64_t id,
                   uint32_t method,
                   uint64_t term)
{
    const ProtobufCEnumValue *mv = protobuf_c_enum_descriptor_get_value(
        &rt__method__descriptor, (int)method);
    unsigned role = rt_rpc_conn_role(conn);
    char why[96];

    if (term != 0 && role != 0 &&
        !(role & (RT_RPC_ROLE_MASTER | RT_RPC_ROLE_ADMIN))) {
        rt_log(RT_LOG_WARN,
               "refusing %s with master term %" PRIu64
               " from %s: only a master sets the term",
               mv ? mv->name : "a request", term, rt_rpc_conn_peer_name(conn));
        rt_rpc_reply_err(conn, id, method, RT_EPERM,
                         "only a master's request carries a master term");
        return RT_EPERM;
    }
    if (ps_fence_check(ps, term, mv ? mv->name : "a request") == 0) {
        return 0;
    }
    snprintf(why, sizeof(why), "older master term %" PRIu64 " < %" PRIu64, term,
             ps->master_term);
    rt_rpc_reply_err(conn, id, method, RT_ESTALE, why);
    return RT_ESTALE;
}

void ps_fence_metrics(const struct ps_server *ps, struct rt_buf *b)
{
    rt_buf_printf(b,
                  "# HELP rt_ps_master_term The highest master term seen.\n"
                  "# TYPE rt_ps_master_term gauge\n"
                  "rt_ps_master_term %" PRIu64
                  "\n"
                  "# HELP rt_ps_master_term_refused_total Master messages "
                  "refused for a term below the highest seen.\n"
                  "# TYPE rt_ps_master_term_refused_total counter\n"
                  "rt_ps_master_term_refused_total %" PRIu64 "\n",
                  ps->master_term, ps->master_term_refused);
}
