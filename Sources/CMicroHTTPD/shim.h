#ifndef CLOUDSYNC_CMICROHTTPD_SHIM_H
#define CLOUDSYNC_CMICROHTTPD_SHIM_H

#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <microhttpd.h>

// MHD_start_daemon is variadic, which Swift cannot call: this takes every option the Swift face sets as a plain
// argument and hands them to it as one MHD_OPTION_ARRAY. A NULL key or certificate leaves TLS off.

// Leaves the request target as the client sent it: the Swift face reads the raw target from the URI callback and
// decodes it itself, so a path is never percent-decoded twice.
static inline size_t cloudsync_mhd_keep_escaped(void *cls, struct MHD_Connection *connection, char *text) {
    (void)cls;
    (void)connection;
    return strlen(text);
}

typedef void *(*cloudsync_mhd_uri_callback)(void *cls, const char *uri, struct MHD_Connection *connection);

static inline struct MHD_Daemon *cloudsync_mhd_start(
    unsigned int flags, int listen_socket,
    MHD_AccessHandlerCallback handler, void *handler_cls,
    MHD_RequestCompletedCallback completed, cloudsync_mhd_uri_callback uri_callback,
    MHD_NotifyConnectionCallback notify, void *callbacks_cls,
    unsigned int connection_limit, unsigned int per_client_limit, size_t memory_limit,
    unsigned int timeout_seconds, const char *tls_key_pem, const char *tls_certificate_pem) {
    struct MHD_OptionItem options[] = {
        {MHD_OPTION_LISTEN_SOCKET, (intptr_t)listen_socket, NULL},
        {MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)completed, callbacks_cls},
        {MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)uri_callback, callbacks_cls},
        {MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)notify, callbacks_cls},
        {MHD_OPTION_UNESCAPE_CALLBACK, (intptr_t)cloudsync_mhd_keep_escaped, NULL},
        {MHD_OPTION_CONNECTION_LIMIT, (intptr_t)connection_limit, NULL},
        {MHD_OPTION_PER_IP_CONNECTION_LIMIT, (intptr_t)per_client_limit, NULL},
        {MHD_OPTION_CONNECTION_MEMORY_LIMIT, (intptr_t)memory_limit, NULL},
        {MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)timeout_seconds, NULL},
        {tls_key_pem ? MHD_OPTION_HTTPS_MEM_KEY : MHD_OPTION_END, 0, (void *)tls_key_pem},
        {MHD_OPTION_HTTPS_MEM_CERT, 0, (void *)tls_certificate_pem},
        {MHD_OPTION_END, 0, NULL},
    };
    if (tls_key_pem != NULL) flags |= MHD_USE_TLS;
    return MHD_start_daemon(
        flags, 0, NULL, NULL, handler, handler_cls, MHD_OPTION_ARRAY, options, MHD_OPTION_END);
}

// MHD_get_connection_info is variadic too: the connection's socket, for the face's head deadline.
static inline int cloudsync_mhd_connection_fd(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info == NULL ? -1 : info->connect_fd;
}

#endif
