#ifndef USHER_CMICROHTTPD_SHIM_H
#define USHER_CMICROHTTPD_SHIM_H
#include <stdarg.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/epoll.h>
#include <microhttpd.h>

/* Swift cannot call C variadic functions. These prefixed wrappers take the
   callbacks as typed parameters and every other option as an array passed
   with MHD_OPTION_ARRAY. Nothing else belongs here. (sys/epoll.h is for
   HangUpWatcher: Glibc's module does not export it.) */

static inline struct MHD_Daemon *
CUsherMHD_start_daemon(unsigned int flags, uint16_t port,
                       MHD_AcceptPolicyCallback accept_policy, void *accept_policy_cls,
                       MHD_AccessHandlerCallback handler, void *handler_cls,
                       MHD_RequestCompletedCallback completed, void *completed_cls,
                       void *(*uri_log)(void *cls, const char *uri, struct MHD_Connection *connection),
                       void *uri_log_cls,
                       MHD_NotifyConnectionCallback notify_connection, void *notify_connection_cls,
                       size_t (*unescape)(void *cls, struct MHD_Connection *connection, char *s),
                       void *unescape_cls,
                       struct MHD_OptionItem *options)
{
    return MHD_start_daemon(flags, port, accept_policy, accept_policy_cls, handler, handler_cls,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, completed_cls,
                            MHD_OPTION_URI_LOG_CALLBACK, uri_log, uri_log_cls,
                            MHD_OPTION_NOTIFY_CONNECTION, notify_connection, notify_connection_cls,
                            MHD_OPTION_UNESCAPE_CALLBACK, unescape, unescape_cls,
                            MHD_OPTION_ARRAY, options,
                            MHD_OPTION_END);
}

/* The port the daemon is bound to (useful after binding port 0). */
static inline uint16_t
CUsherMHD_daemon_port(struct MHD_Daemon *daemon)
{
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info == NULL ? 0 : info->port;
}

/* The number of open connections. */
static inline unsigned int
CUsherMHD_daemon_connections(struct MHD_Daemon *daemon)
{
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
    return info == NULL ? 0 : info->num_connections;
}

/* A connection's socket (-1 when unknown). */
static inline int
CUsherMHD_connection_fd(struct MHD_Connection *connection)
{
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info == NULL ? -1 : info->connect_fd;
}

/* A connection's client address (NULL when unknown). */
static inline const struct sockaddr *
CUsherMHD_connection_address(struct MHD_Connection *connection)
{
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    return info == NULL ? NULL : info->client_addr;
}

/* What the connection-notify callback stored for this connection (NULL when nothing). */
static inline void *
CUsherMHD_socket_context(struct MHD_Connection *connection)
{
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info == NULL ? NULL : info->socket_context;
}

/* The length of the request's head (request line and headers), counted from
   the method's first byte; 0 when not known yet. */
static inline size_t
CUsherMHD_request_header_size(struct MHD_Connection *connection)
{
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    return info == NULL ? 0 : info->header_size;
}

#endif
