#ifndef CLOUDSYNC_CCURL_SHIM_H
#define CLOUDSYNC_CCURL_SHIM_H

#include <curl/curl.h>

// CURLVERSION_NOW is a macro naming another macro's enum member, which Swift does not import.
// What the libcurl loaded at run time says about itself: its version and the TLS library it was built with.
static inline const curl_version_info_data *cloudsync_curl_version_info(void) {
    return curl_version_info(CURLVERSION_NOW);
}

#endif
