#ifndef CLOUDSYNC_CMALLOC_SHIM_H
#define CLOUDSYNC_CMALLOC_SHIM_H

/* glibc's allocator settings, which Swift's Glibc module leaves out. */
#include <malloc.h>

/* Sets M_MMAP_THRESHOLD: allocations of at least `bytes` get pages of their own, unmapped when freed (a fixed
   threshold also stops glibc raising it as mapped blocks are freed). 1 when set, 0 when glibc refused. */
static inline int cloudsync_set_mmap_threshold(int bytes) {
    return mallopt(M_MMAP_THRESHOLD, bytes);
}

#endif
