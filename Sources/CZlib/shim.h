#ifndef CLOUDSYNC_CZLIB_SHIM_H
#define CLOUDSYNC_CZLIB_SHIM_H

#include <zlib.h>

/* inflateInit2 is a macro, which Swift does not import: raw DEFLATE (no zlib or gzip wrapper) is a negative window. */
static inline int cloudsync_inflate_init_raw(z_stream *stream) {
    return inflateInit2(stream, -MAX_WBITS);
}

#endif
