#ifndef CLOUDSYNC_CPOSTGRES_SHIM_H
#define CLOUDSYNC_CPOSTGRES_SHIM_H

#include <libpq-fe.h>

#endif
