/* Errors: one table gives every rangetable error its frozen numeric code,
 * HTTP status, Azure error code and default message, so they cannot drift
 * apart. Codes travel in RPC replies: never renumber an entry.
 *
 * Convention (libuv, LMDB): 0 is success, a negative value is an error, a
 * positive value is a count. Our codes live in [-10999, -10000] so they never
 * collide with libuv's -errno; rt_strerror() covers both.
 * Thread: all functions are pure and thread-safe. */
#ifndef RT_ERR_H
#define RT_ERR_H

#include <stddef.h>

#define RT_ERRMSG_SIZE 256

/* X(name, code, http, azure_code, message) — message texts from
 * docs/table-api-spec.md §8.2. */
#define RT_ERR_MAP(X)                                                          \
    X(EINVAL, -10001, 400, "InvalidInput",                                     \
      "One of the request inputs is not valid.")                               \
    X(ENOTFOUND, -10002, 404, "ResourceNotFound",                              \
      "The specified resource does not exist.")                                \
    X(ETABLENOTFOUND, -10003, 404, "TableNotFound",                            \
      "The table specified does not exist.")                                   \
    X(ETABLEEXISTS, -10004, 409, "TableAlreadyExists",                         \
      "The table specified already exists.")                                   \
    X(ETABLEBEINGDELETED, -10005, 409, "TableBeingDeleted",                    \
      "The specified table is being deleted. Try operation later.")            \
    X(EEXIST, -10006, 409, "EntityAlreadyExists",                              \
      "The specified entity already exists.")                                  \
    X(EPRECOND, -10007, 412, "UpdateConditionNotSatisfied",                    \
      "The update condition specified in the request was not satisfied.")      \
    X(EOUTOFRANGE, -10008, 400, "OutOfRangeInput",                             \
      "One of the request inputs is out of range.")                            \
    X(EBADNAME, -10009, 400, "InvalidResourceName",                            \
      "The specified resource name contains invalid characters.")              \
    X(EVALUETYPE, -10010, 400, "InvalidValueType",                             \
      "The value specified is invalid.")                                       \
    X(ENEEDVALUE, -10011, 400, "PropertiesNeedValue",                          \
      "The values are not specified for all properties in the entity.")        \
    X(EPROPNAME, -10012, 400, "PropertyNameInvalid",                           \
      "The property name is invalid.")                                         \
    X(EPROPNAMELONG, -10013, 400, "PropertyNameTooLong",                       \
      "The property name exceeds the maximum allowed length.")                 \
    X(EPROPTOOLARGE, -10014, 400, "PropertyValueTooLarge",                     \
      "The property value exceeds the maximum allowed size (64KB). If the "    \
      "property value is a string, it is UTF-16 encoded and the maximum "      \
      "number of characters should be 32K or less.")                           \
    X(EENTITYTOOLARGE, -10015, 400, "EntityTooLarge",                          \
      "The entity is larger than the maximum size permitted.")                 \
    X(ETOOMANYPROPS, -10016, 400, "TooManyProperties",                         \
      "The entity contains more properties than allowed.")                     \
    X(EDUPPROPS, -10017, 400, "DuplicatePropertiesSpecified",                  \
      "A property is specified more than one time.")                           \
    X(EDUPROW, -10018, 400, "InvalidDuplicateRow",                             \
      "The batch request contains multiple changes with same row key. An "     \
      "entity can appear only once in a batch request.")                       \
    X(EDIFFPARTITIONS, -10019, 400, "CommandsInBatchActOnDifferentPartitions", \
      "All commands in a batch must operate on same entity group.")            \
    X(EJSONNOTSUPPORTED, -10020, 415, "JsonFormatNotSupported",                \
      "JSON format is not supported.")                                         \
    X(EATOMNOTSUPPORTED, -10021, 415, "AtomFormatNotSupported",                \
      "Atom format is not supported.")                                         \
    X(EMETHOD, -10022, 405, "MethodNotAllowed",                                \
      "The requested method is not allowed on the specified resource.")        \
    X(EVERB, -10023, 405, "UnsupportedHttpVerb",                               \
      "The resource doesn't support the specified HTTP verb.")                 \
    X(ENOTIMPL, -10024, 501, "NotImplemented",                                 \
      "The requested operation is not implemented on the specified "           \
      "resource.")                                                             \
    X(EAUTH, -10025, 403, "AuthenticationFailed",                              \
      "Server failed to authenticate the request. Make sure the value of "     \
      "Authorization header is formed correctly including the signature.")     \
    X(EAUTHINFO, -10026, 400, "InvalidAuthenticationInfo",                     \
      "Authentication information is not given in the correct format. "        \
      "Check the value of Authorization header.")                              \
    X(ENOAUTH, -10027, 401, "NoAuthenticationInformation",                     \
      "Server failed to authenticate the request. Please refer to the "        \
      "information in the www-authenticate header.")                           \
    X(EAUTHZ, -10028, 403, "AuthorizationFailure",                             \
      "This request is not authorized to perform this operation.")             \
    X(EPERM, -10029, 403, "AuthorizationPermissionMismatch",                   \
      "This request is not authorized to perform this operation using this "   \
      "permission.")                                                           \
    X(EHEADER, -10030, 400, "InvalidHeaderValue",                              \
      "The value for one of the HTTP headers is not in the correct format.")   \
    X(EMISSINGHEADER, -10031, 400, "MissingRequiredHeader",                    \
      "A required HTTP header was not specified.")                             \
    X(EQUERYPARAM, -10032, 400, "InvalidQueryParameterValue",                  \
      "Value for one of the query parameters specified in the request URI "    \
      "is invalid.")                                                           \
    X(EURI, -10033, 400, "InvalidUri",                                         \
      "The requested URI does not represent any resource on the server.")      \
    X(EXML, -10034, 400, "InvalidXmlDocument",                                 \
      "The specified XML is not syntactically valid.")                         \
    X(ETOOLARGE, -10035, 413, "RequestBodyTooLarge",                           \
      "The request body is too large and exceeds the maximum permissible "     \
      "limit.")                                                                \
    X(ECORS, -10036, 403, "CorsPreflightFailure",                              \
      "CORS not enabled or no matching rule found for this request.")          \
    X(EINTERNAL, -10037, 500, "InternalError",                                 \
      "The server encountered an internal error. Please retry the request.")   \
    X(ETIMEDOUT, -10038, 500, "OperationTimedOut",                             \
      "The operation could not be completed within the permitted time.")       \
    X(EBUSY, -10039, 503, "ServerBusy",                                        \
      "The server is currently unable to receive requests. Please retry "      \
      "your request.")                                                         \
    X(EENTITYNOTFOUND, -10040, 404, "EntityNotFound",                          \
      "The specified entity does not exist.")                                  \
    X(EHOST, -10041, 400, "HostInformationNotPresent",                         \
      "The request does not contain required host information.")               \
    X(EACCOUNT, -10042, 400, "InvalidResourceName",                            \
      "The specified resource name contains invalid characters.")              \
    X(EXMETHODPOST, -10043, 400, "XMethodNotUsingPost",                        \
      "The X-HTTP-Method header can only be used with POST.")                  \
    X(EXMETHODCOUNT, -10044, 400, "XMethodIncorrectCount",                     \
      "More than one X-HTTP-Method header was specified.")                     \
    X(EXMETHODVALUE, -10045, 400, "XMethodIncorrectValue",                     \
      "The X-HTTP-Method header value is not valid.")                          \
    X(ESOURCEIP, -10046, 403, "AuthorizationSourceIPMismatch",                 \
      "This request is not authorized to perform this operation using this "   \
      "source IP.")                                                            \
    X(EPROTOCOL, -10047, 403, "AuthorizationProtocolMismatch",                 \
      "This request is not authorized to perform this operation using this "   \
      "protocol.")                                                             \
    X(ERESTYPE, -10048, 403, "AuthorizationResourceTypeMismatch",              \
      "This request is not authorized to perform this operation using this "   \
      "resource type.")                                                        \
    X(ESERVICE, -10049, 403, "AuthorizationServiceMismatch",                   \
      "This request is not authorized to perform this operation using this "   \
      "service.")                                                              \
    X(EURILONG, -10050, 414, "InvalidUri", "The request URI is too long.")     \
    /* Internal codes: never shown raw to clients; mapped at the edge. */      \
    X(ESTALE, -10100, 503, "ServerBusy",                                       \
      "The range is not served here at that epoch (stale partition map).")     \
    X(ENOCONN, -10101, 503, "ServerBusy",                                      \
      "The server is currently unable to receive requests. Please retry "      \
      "your request.")                                                         \
    X(ECANCELED, -10102, 503, "ServerBusy", "Operation canceled.")             \
    X(ENOMEM, -10103, 500, "InternalError", "Out of memory.")                  \
    /* A store that cannot take writes (full, failing I/O): Azure's            \
     * retryable 503 ServerBusy, never a 500; the write was not applied        \
     * and reads go on (frontend/README.md). */                                \
    X(EIO, -10104, 503, "ServerBusy", "I/O error.")                            \
    X(ECORRUPT, -10105, 500, "InternalError", "Corrupt data.")                 \
    X(ENOSPACE, -10106, 503, "ServerBusy", "Storage is full.")                 \
    X(EPROTO, -10107, 500, "InternalError", "RPC protocol error.")             \
    X(ECONFIG, -10108, 500, "InternalError", "Bad configuration.")             \
    /* Replication (docs/DESIGN-replication.md §4). */                        \
    X(ENOTPRIMARY, -10109, 503, "ServerBusy",                                  \
      "The range is not served by its primary here (stale partition map).")    \
    X(ESEALED, -10110, 500, "InternalError",                                   \
      "The range is sealed at a newer epoch.")                                 \
    X(ELSNGAP, -10111, 500, "InternalError",                                   \
      "The append is not at the next LSN.")                                    \
    X(EDIVERGED, -10112, 500, "InternalError",                                 \
      "The replica's history diverges.")                                       \
    /* RPC: a call that never left this process (rt_rpc.h). */                 \
    X(ENOTSENT, -10113, 503, "ServerBusy",                                     \
      "The request was never sent to the server.")                             \
    /* Masters (DESIGN-master-ha.md §5.2): the body is an rt.NotLeader. */    \
    X(ENOTLEADER, -10114, 503, "ServerBusy",                                   \
      "The master contacted is not the leader; retry.")

enum rt_err {
    RT_OK = 0,
#define RT__ERR_ENUM(name, code, http, azure, msg) RT_##name = (code),
    RT_ERR_MAP(RT__ERR_ENUM)
#undef RT__ERR_ENUM
};

/* True when @code is one of ours (not a libuv/errno code). */
int rt_err_is_rt(int code);
/* "ENOTFOUND" etc.; "OK" for 0; "UNKNOWN" for codes outside the table. */
const char *rt_err_name(int code);
/* HTTP status for the client; 500 for unknown codes (including libuv's). */
int rt_err_http_status(int code);
/* Azure error code string ("InternalError" for unknown codes). */
const char *rt_err_azure_code(int code);
/* Default client-facing message. */
const char *rt_err_message(int code);
/* What an HTTP client is told for @code: rt_err_message(), except that an
 * internal code (RT_ESTALE and after: "Storage is full.", "I/O error.")
 * gets the documented text of its Azure code ("The server is currently
 * unable to receive requests. Please retry your request."), as Azure
 * shows no more. The logs keep rt_strerror(). */
const char *rt_err_client_message(int code);
/* Human message for logs: our table, else libuv's uv_strerror(). */
const char *rt_strerror(int code);
/* Reason phrase for an HTTP status ("Not Found"). */
const char *rt_http_reason(int status);

/* Write "fmt..." into @errmsg, then append ": <old contents>" (raft's
 * ErrMsgWrapf). @errmsg must hold RT_ERRMSG_SIZE bytes. */
void rt_errmsg_printf(char *errmsg, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void rt_errmsg_wrapf(char *errmsg, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Asserts for our own bugs (never for client input). In a release build
 * (NDEBUG) the condition is not evaluated but still compiled, so a
 * variable used only in an assertion is not "unused" there and the
 * condition cannot rot. */
#include <assert.h>
#ifdef NDEBUG
#define RT_PRE(cond) ((void)sizeof(!(cond)))
#define RT_POST(cond) ((void)sizeof(!(cond)))
#else
#define RT_PRE(cond) assert(cond)
#define RT_POST(cond) assert(cond)
#endif

#ifndef container_of
#define container_of(ptr, type, member) \
    ((type *)((char *)(ptr)-offsetof(type, member)))
#endif

#endif
