#ifndef USHER_CHIREDIS_SHIM_H
#define USHER_CHIREDIS_SHIM_H
#include <poll.h>
#include <sys/time.h>
#include <hiredis/hiredis.h>

/* Swift sees `errstr` as a 128-element tuple: this hands it over as a C
   string. Nothing else belongs here; commands go through the Argv calls. */
static inline const char *
CUsherRedis_errstr(const redisContext *context)
{
    return context->errstr;
}

#endif
