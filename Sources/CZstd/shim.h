#ifndef CLOUDSYNC_CZSTD_SHIM_H
#define CLOUDSYNC_CZSTD_SHIM_H

#include <zstd.h>

#endif
