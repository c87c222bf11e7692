#ifndef CLOUDSYNC_CSODIUM_SHIM_H
#define CLOUDSYNC_CSODIUM_SHIM_H

#include <sodium.h>

#endif
