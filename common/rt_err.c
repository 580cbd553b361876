#include "rt_err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <uv.h>

struct rt__err_entry
{
    int code;
    int http;
    const char *name;
    const char *azure;
    const char *msg;
};

static const struct rt__err_entry rt__errs[] = {
#define RT__ERR_ROW(name, code, http, azure, msg) \
    {code, http, #name, azure, msg},
    RT_ERR_MAP(RT__ERR_ROW)
#undef RT__ERR_ROW
};

static const struct rt__err_entry *rt__err_find(int code)
{
    for (size_t i = 0; i < sizeof(rt__errs) / sizeof(rt__errs[0]); i++) {
        if (rt__errs[i].code == code) {
            return &rt__errs[i];
        }
    }
    return NULL;
}

int rt_err_is_rt(int code)
{
    return rt__err_find(code) != NULL;
}

const char *rt_err_name(int code)
{
    const struct rt__err_entry *e;
    if (code == 0) {
        return "OK";
    }
    e = rt__err_find(code);
    return e ? e->name : "UNKNOWN";
}

int rt_err_http_status(int code)
{
    const struct rt__err_entry *e = rt__err_find(code);
    if (code == 0) {
        return 200;
    }
    return e ? e->http : 500;
}

const char *rt_err_azure_code(int code)
{
    const struct rt__err_entry *e = rt__err_find(code);
    return e ? e->azure : "InternalError";
}

const char *rt_err_message(int code)
{
    const struct rt__err_entry *e = rt__err_find(code);
    return e ? e->msg
             : "The server encountered an internal error. Please retry the "
               "request.";
}

const char *rt_err_client_message(int code)
{
    const struct rt__err_entry *e = rt__err_find(code);
    if (!e || code > RT_ESTALE) {
        return rt_err_message(code);
    }
    for (size_t i = 0; i < sizeof(rt__errs) / sizeof(rt__errs[0]); i++) {
        if (rt__errs[i].code > RT_ESTALE &&
            strcmp(rt__errs[i].azure, e->azure) == 0) {
            return rt__errs[i].msg;
        }
    }
    return rt_err_message(RT_EINTERNAL);
}

const char *rt_strerror(int code)
{
    const struct rt__err_entry *e;
    if (code == 0) {
        return "success";
    }
    e = rt__err_find(code);
    if (e) {
        return e->msg;
    }
    return uv_strerror(code);
}

const char *rt_http_reason(int status)
{
    switch (status) {
        case 200:
            return "OK";
        case 201:
            return "Created";
        case 202:
            return "Accepted";
        case 204:
            return "No Content";
        case 400:
            return "Bad Request";
        case 401:
            return "Unauthorized";
        case 403:
            return "Forbidden";
        case 404:
            return "Not Found";
        case 405:
            return "Method Not Allowed";
        case 409:
            return "Conflict";
        case 411:
            return "Length Required";
        case 412:
            return "Precondition Failed";
        case 413:
            return "Request Entity Too Large";
        case 414:
            return "URI Too Long";
        case 415:
            return "Unsupported Media Type";
        case 500:
            return "Internal Server Error";
        case 501:
            return "Not Implemented";
        case 503:
            return "Service Unavailable";
        default:
            return "Unknown";
    }
}

void rt_errmsg_printf(char *errmsg, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errmsg, RT_ERRMSG_SIZE, fmt, ap);
    va_end(ap);
}

void rt_errmsg_wrapf(char *errmsg, const char *fmt, ...)
{
    char prev[RT_ERRMSG_SIZE];
    char head[RT_ERRMSG_SIZE];
    va_list ap;
    memcpy(prev, errmsg, RT_ERRMSG_SIZE);
    prev[RT_ERRMSG_SIZE - 1] = '\0';
    va_start(ap, fmt);
    vsnprintf(head, sizeof(head), fmt, ap);
    va_end(ap);
    /* Truncation is fine: the newest context comes first. */
    size_t hn = strlen(head);
    memcpy(errmsg, head, hn + 1);
    if (prev[0] && hn + 2 < RT_ERRMSG_SIZE) {
        size_t room = RT_ERRMSG_SIZE - hn - 3;
        size_t pn = strlen(prev);
        if (pn > room) {
            pn = room;
        }
        memcpy(errmsg + hn, ": ", 2);
        memcpy(errmsg + hn + 2, prev, pn);
        errmsg[hn + 2 + pn] = '\0';
    }
}
