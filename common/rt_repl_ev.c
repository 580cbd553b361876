/* The action list of rt_repl_ev.h: a vector of actions plus the record
 * copies they point into. */
#include "rt_repl_ev.h"

#include <stdlib.h>
#include <string.h>

#include "rt_alloc.h"

void rt_repl_actions_init(struct rt_repl_actions *a)
{
    memset(a, 0, sizeof(*a));
}

void rt_repl_actions_reset(struct rt_repl_actions *a)
{
    for (size_t i = 0; i < a->n_blobs; i++) {
        free(a->blobs[i]);
    }
    a->n_blobs = 0;
    a->n = 0;
}

void rt_repl_actions_close(struct rt_repl_actions *a)
{
    rt_repl_actions_reset(a);
    free(a->blobs);
    free(a->v);
    memset(a, 0, sizeof(*a));
}

static const uint8_t *rt__repl_keep(struct rt_repl_actions *a,
                                    const uint8_t *p,
                                    size_t n)
{
    if (n == 0) {
        return NULL;
    }
    if (a->n_blobs == a->cap_blobs) {
        a->cap_blobs = a->cap_blobs ? 2 * a->cap_blobs : 8;
        a->blobs = rt_xrealloc(a->blobs, a->cap_blobs * sizeof(*a->blobs));
    }
    uint8_t *c = rt_xmemdup(p, n);
    a->blobs[a->n_blobs++] = c;
    return c;
}

struct rt_repl_action *rt_repl_actions_add(struct rt_repl_actions *a,
                                           const struct rt_repl_action *act)
{
    if (a->n == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 16;
        a->v = rt_xrealloc(a->v, a->cap * sizeof(*a->v));
    }
    struct rt_repl_action *out = &a->v[a->n++];
    *out = *act;
    if ((act->kind == RT_REPL_ACT_SEND || act->kind == RT_REPL_ACT_WRITE) &&
        act->msg.kind == RT_REPL_MSG_APPEND) {
        struct rt_repl_append *ap = &out->msg.u.append;
        ap->records = rt__repl_keep(a, ap->records, ap->records_len);
    }
    return out;
}

const char *rt_repl_ev_kind_name(enum rt_repl_ev_kind k)
{
    static const char *const names[RT_REPL_EV__NR] = {
        "msg",          "conn",        "timer",     "disk_done", "read_done",
        "client_write", "client_read", "committed", "group"};
    return (unsigned)k < RT_REPL_EV__NR ? names[k] : "?";
}

const char *rt_repl_act_kind_name(enum rt_repl_act_kind k)
{
    static const char *const names[RT_REPL_ACT__NR] = {
        "send", "write", "read", "timer", "reply", "propose", "event"};
    return (unsigned)k < RT_REPL_ACT__NR ? names[k] : "?";
}

const char *rt_repl_msg_kind_name(enum rt_repl_msg_kind k)
{
    static const char *const names[RT_REPL_MSG__NR] = {
        "append",     "ack",    "seal",        "seal_resp", "isr_change",
        "isr_resp",   "assign", "assign_resp", "heartbeat", "probe",
        "probe_resp", "begin",  "snap_end",    "copy_resp"};
    return (unsigned)k < RT_REPL_MSG__NR ? names[k] : "?";
}

const char *rt_repl_role_name(enum rt_repl_role r)
{
    static const char *const names[RT_REPL_ROLE__NR] = {"none", "primary",
                                                        "secondary", "learner"};
    return (unsigned)r < RT_REPL_ROLE__NR ? names[r] : "?";
}

int rt_repl_conf_in_isr(const struct rt_repl_conf *c, uint64_t id)
{
    for (size_t i = 0; i < c->n_isr; i++) {
        if (c->isr[i] == id) {
            return 1;
        }
    }
    return 0;
}

enum rt_repl_role rt_repl_conf_role(const struct rt_repl_conf *c, uint64_t id)
{
    for (size_t i = 0; i < c->n_members; i++) {
        if (c->members[i].server_id == id) {
            return c->members[i].role;
        }
    }
    return RT_REPL_ROLE_NONE;
}
