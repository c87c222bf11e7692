#ifndef CLOUDSYNC_CJQ_SHIM_H
#define CLOUDSYNC_CJQ_SHIM_H

#include <jq.h>

#endif
