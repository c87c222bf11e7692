#ifndef CLOUDSYNC_CCRYPTO_SHIM_H
#define CLOUDSYNC_CCRYPTO_SHIM_H

#include <openssl/crypto.h>
#include <openssl/evp.h>

#endif
